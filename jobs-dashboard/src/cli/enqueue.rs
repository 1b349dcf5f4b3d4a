//! `jobs-dashboard enqueue`: one job of a kind, from JSON, with the options the kind's live
//! nodes declare where the command line says nothing.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use jobs_core::{KindRequest, driver_for_url};

use super::error::CliError;
use crate::liveness::live_kinds;

#[derive(Debug, Args)]
pub(super) struct EnqueueArgs {
    /// The job kind, as the worker registers it (`#[job]` default: `module::function`).
    #[arg(long)]
    kind: String,
    /// The arguments as JSON.
    #[arg(long, default_value = "null")]
    args: String,
    /// The queue (default: the kind's own, as its live nodes declare it, or the one queue
    /// live nodes that run it serve).
    #[arg(long)]
    queue: Option<String>,
    /// Priority: lower runs first (default: the kind's).
    #[arg(long)]
    priority: Option<i16>,
    /// Attempts allowed (default: the kind's).
    #[arg(long)]
    max_attempts: Option<i32>,
    /// Time limit per attempt, e.g. `30s` (default: the kind's).
    #[arg(long, value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// A uniqueness key of your own, instead of the one the kind's options compute.
    #[arg(long)]
    unique_key: Option<String>,
    /// Run after this long, e.g. `90s`, `15m`, `2h`.
    #[arg(long = "in", value_parser = humantime::parse_duration, conflicts_with = "at")]
    delay: Option<Duration>,
    /// Run at this time (RFC 3339, e.g. 2026-11-23T09:00:00Z).
    #[arg(long)]
    at: Option<chrono::DateTime<chrono::Utc>>,
    /// Tags (repeatable), added to the kind's.
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Enqueue a kind that no live node runs (a worker that registers it will start
    /// later); without it, such a kind is refused, as a likely typo.
    #[arg(long)]
    allow_unknown_kind: bool,
}

pub(super) async fn enqueue(url: &str, args: EnqueueArgs, out: &mut impl Write) -> Result<(), CliError> {
    let json: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| CliError::Invalid(format!("--args is not valid JSON: {e}")))?;
    let driver = driver_for_url(url, 1)?;
    let kinds = live_kinds(&*driver).await?;
    let known = kinds.iter().find(|k| k.kind == args.kind);
    let queue = match (&args.queue, known) {
        (Some(queue), _) => queue.clone(),
        (None, Some(k)) => match (k.default_queue(), k.queues.as_slice()) {
            (Some(queue), _) => queue.to_owned(),
            (None, [only]) => only.clone(),
            (None, queues) if queues.iter().any(|q| q == jobs_core::DEFAULT_QUEUE) => {
                jobs_core::DEFAULT_QUEUE.to_owned()
            }
            (None, queues) => {
                return Err(CliError::Invalid(format!(
                    "kind `{}` runs on nodes serving {}: say which with --queue",
                    args.kind,
                    queues.join(", ")
                )));
            }
        },
        (None, None) if args.allow_unknown_kind => jobs_core::DEFAULT_QUEUE.to_owned(),
        (None, None) => String::new(),
    };
    if known.is_none() {
        let live: Vec<&str> = kinds.iter().map(|k| k.kind.as_str()).collect();
        let live = if live.is_empty() {
            "no node is live".to_owned()
        } else {
            format!("live kinds: {}", live.join(", "))
        };
        if !args.allow_unknown_kind {
            return Err(CliError::Invalid(format!(
                "no live node runs kind `{}` ({live}): check its spelling, start a worker that registers \
                 it, or pass --allow-unknown-kind to enqueue it for a worker that starts later",
                args.kind
            )));
        }
        // On standard error: standard output carries the command's result.
        eprintln!(
            "warning: no live node runs kind `{}` ({live}); enqueued for a worker that starts later, with \
             the defaults where the command line says nothing (no node declares the kind's own): queue {queue}, \
             {} attempts, {}",
            args.kind,
            args.max_attempts.unwrap_or(jobs_core::DEFAULT_MAX_ATTEMPTS),
            args.timeout.map_or("no timeout".to_owned(), |t| format!("a {t:?} timeout")),
        );
    }
    // The kind's declared options where the command line says nothing, as a typed
    // request has them (a kind no live node declares: the defaults).
    let options = known.and_then(|k| k.options.clone()).unwrap_or_default();
    let mut request = KindRequest::new(&args.kind, json).queue(&queue);
    if let Some(priority) = args.priority {
        request = request.priority(priority);
    }
    if let Some(attempts) = args.max_attempts {
        request = request.max_attempts(attempts);
    }
    if let Some(timeout) = args.timeout {
        request = request.timeout(Some(timeout));
    }
    if let Some(key) = args.unique_key {
        request = request.unique_key(key);
    }
    for tag in args.tags {
        request = request.tag(tag);
    }
    if let Some(at) = args.at {
        request = request.run_at(at);
    }
    if let Some(delay) = args.delay {
        request = request.run_in(delay);
    }
    let inserted = jobs_core::enqueue_many(&driver, [request.to_new_job(options)?]).await?;
    let first = inserted.first().ok_or_else(|| CliError::Invalid("nothing was inserted".into()))?;
    if first.existing {
        writeln!(out, "job {} ({} on queue {queue}) already exists: nothing enqueued", first.id, args.kind)?;
        return Ok(());
    }
    writeln!(out, "enqueued job {} ({} on queue {queue})", first.id, args.kind)?;
    Ok(())
}
