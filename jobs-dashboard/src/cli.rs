//! The `jobs-dashboard` command line: migrate, inspect and manage jobs, enqueue one from
//! JSON, and serve the dashboard.
//!
//! ```text
//! jobs-dashboard migrate
//! jobs-dashboard stats
//! jobs-dashboard retry --state discarded --queue mailers --yes
//! jobs-dashboard cancel --id 42
//! jobs-dashboard enqueue --kind app::send_welcome --queue mailers --args '{"user_id": 7}'
//! jobs-dashboard serve --bind 127.0.0.1:8080
//! ```
//!
//! Every command reads the database from `--database-url` or `DATABASE_URL`.

use std::io::Write;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use jobs_core::driver::{Capability, JobCountByQueueAndStateParams, JobCountParams};
use jobs_core::{Action, Count, JobFilter, JobState, KindRequest, driver_for_url};

/// What can go wrong on the command line. Each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The database or the jobs library refused.
    #[error(transparent)]
    Jobs(#[from] jobs_core::Error),
    /// An argument's value is wrong.
    #[error("{0}")]
    Invalid(String),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
}

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "jobs-dashboard", version, about = "Migrate, inspect and manage jobs; serve the dashboard.")]
pub struct Cli {
    /// The database holding the jobs: `postgres://…`, `sqlite://path`, `mysql://…`.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Applies the pending migrations of the jobs schema.
    Migrate,
    /// Prints the number of jobs per queue and state.
    Stats,
    /// Makes jobs available to run now (failed, cancelled, scheduled or finished ones).
    Retry(Selection),
    /// Cancels jobs (running ones are asked to stop).
    Cancel(Selection),
    /// Deletes jobs (running ones are kept).
    Delete(Selection),
    /// Enqueues one job from JSON arguments.
    Enqueue(EnqueueArgs),
    /// Serves the dashboard.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: String,
        /// Path to mount the dashboard at.
        #[arg(long, default_value = "/")]
        mount: String,
        /// Hide and refuse every action.
        #[arg(long)]
        read_only: bool,
        /// Read pages from this replica of the database (actions still go to
        /// `--database-url`); the overview shows how far behind it is.
        #[arg(long, env = "JOBS_REPLICA_URL", hide_env_values = true)]
        replica_url: Option<String>,
    },
}

/// Which jobs an action applies to: ids, or a filter, or everything.
#[derive(Debug, Args)]
struct Selection {
    /// These jobs (repeatable).
    #[arg(long = "id")]
    ids: Vec<i64>,
    /// Jobs in this state (repeatable): available, scheduled, running, retryable,
    /// completed, discarded, cancelled.
    #[arg(long = "state")]
    states: Vec<String>,
    /// Jobs in this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Jobs with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Jobs whose arguments or metadata contain this JSON object, e.g. '{"user_id": 7}'.
    #[arg(long)]
    search: Option<String>,
    /// Every job (instead of a filter).
    #[arg(long, conflicts_with_all = ["ids", "states", "queue", "kind", "tag", "search"])]
    all: bool,
    /// Act; without it, only say how many jobs would be changed.
    #[arg(long)]
    yes: bool,
}

#[derive(Debug, Args)]
struct EnqueueArgs {
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

/// Jobs changed per statement by an action on a filter.
const BATCH: i64 = 1_000;

impl Cli {
    fn url(&self) -> Result<&str, CliError> {
        self.database_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| CliError::Invalid("no database: pass --database-url or set DATABASE_URL".into()))
    }

    /// Runs the command, writing its report to `out`.
    pub async fn run(self, out: &mut impl Write) -> Result<(), CliError> {
        let url = self.url()?.to_owned();
        match self.command {
            Command::Migrate => {
                let applied = driver_for_url(&url, 1)?.migrate().await.map_err(jobs_core::Error::from)?;
                if applied.is_empty() {
                    writeln!(out, "the jobs schema is up to date")?;
                }
                for version in applied {
                    writeln!(out, "applied {version}")?;
                }
            }
            Command::Stats => stats(&url, out).await?,
            Command::Retry(selection) => act(&url, Action::Retry, selection, out).await?,
            Command::Cancel(selection) => act(&url, Action::Cancel, selection, out).await?,
            Command::Delete(selection) => act(&url, Action::Delete, selection, out).await?,
            Command::Enqueue(args) => enqueue(&url, args, out).await?,
            Command::Serve { bind, mount, read_only, replica_url } => {
                serve(&url, replica_url.as_deref(), &bind, &mount, read_only, out).await?
            }
        }
        Ok(())
    }
}

async fn stats(url: &str, out: &mut impl Write) -> Result<(), CliError> {
    let driver = driver_for_url(url, 1)?;
    let counts = driver
        .job_count_by_queue_and_state(JobCountByQueueAndStateParams {})
        .await
        .map_err(jobs_core::Error::from)?;
    let mut queues: Vec<&str> = counts.iter().map(|(q, _, _)| q.as_str()).collect();
    queues.dedup();
    let width = queues.iter().map(|q| q.len()).max().unwrap_or(5).max(5);
    write!(out, "{:<width$}", "queue")?;
    for state in JobState::ALL {
        write!(out, " {:>10}", state.as_str())?;
    }
    writeln!(out)?;
    for queue in queues {
        write!(out, "{queue:<width$}")?;
        for state in JobState::ALL {
            let n = counts.iter().find(|(q, s, _)| q == queue && *s == state).map_or(0, |c| c.2);
            write!(out, " {n:>10}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn filter(selection: &Selection) -> Result<JobFilter, CliError> {
    let mut filter = JobFilter::default();
    for state in &selection.states {
        let state: JobState = state.parse().map_err(|_| {
            CliError::Invalid(format!(
                "unknown state `{state}`; use one of: {}",
                JobState::ALL.map(JobState::as_str).join(", ")
            ))
        })?;
        filter.states.push(state);
    }
    filter.queue = selection.queue.clone();
    filter.kind = selection.kind.clone();
    filter.tag = selection.tag.clone();
    if let Some(search) = &selection.search {
        let value: serde_json::Value = serde_json::from_str(search)
            .map_err(|e| CliError::Invalid(format!("--search is not valid JSON: {e}")))?;
        if !value.is_object() {
            return Err(CliError::Invalid("--search must be a JSON object, e.g. '{\"user_id\": 7}'".into()));
        }
        filter.search = Some(value);
    }
    Ok(filter)
}

async fn act(url: &str, action: Action, selection: Selection, out: &mut impl Write) -> Result<(), CliError> {
    let filter = filter(&selection)?;
    let verb = action.verb();
    if selection.ids.is_empty() && filter == JobFilter::default() && !selection.all {
        return Err(CliError::Invalid(format!(
            "say which jobs to {verb}: --id, a filter (--state, --queue, --kind, --tag, --search), or --all"
        )));
    }
    let driver = driver_for_url(url, 1)?;
    if filter.search.is_some() && !driver.capabilities().has(Capability::JsonContainment) {
        return Err(CliError::Invalid(format!(
            "--search needs {}, which the {} driver lacks",
            Capability::JsonContainment,
            driver.name()
        )));
    }
    if !selection.ids.is_empty() {
        if !selection.yes {
            writeln!(out, "would {verb} up to {} jobs by id; pass --yes to do it", selection.ids.len())?;
            return Ok(());
        }
        let applied = action.apply(&*driver, &selection.ids).await?;
        writeln!(
            out,
            "{} of {} jobs {}{}",
            applied.changed,
            selection.ids.len(),
            action.past(),
            applied.held_note()
        )?;
        return Ok(());
    }
    if !selection.yes {
        let count = driver
            .job_count(JobCountParams { filter: &filter, cap: 100_000 })
            .await
            .map_err(jobs_core::Error::from)?;
        let label = match count {
            Count::Exact(n) => n.to_string(),
            Count::Estimate(n) => format!("about {n}"),
            Count::AtLeast(n) => format!("more than {n}"),
        };
        writeln!(
            out,
            "{label} jobs match; pass --yes to {verb} them (running jobs are never retried or deleted)"
        )?;
        return Ok(());
    }
    let applied = action.apply_to_matching(&*driver, &filter, BATCH).await?;
    writeln!(out, "{} jobs {}{}", applied.changed, action.past(), applied.held_note())?;
    Ok(())
}

async fn enqueue(url: &str, args: EnqueueArgs, out: &mut impl Write) -> Result<(), CliError> {
    let json: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|e| CliError::Invalid(format!("--args is not valid JSON: {e}")))?;
    let driver = driver_for_url(url, 1)?;
    let kinds = crate::liveness::live_kinds(&*driver).await?;
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

async fn serve(
    url: &str,
    replica_url: Option<&str>,
    bind: &str,
    mount: &str,
    read_only: bool,
    out: &mut impl Write,
) -> Result<(), CliError> {
    if !read_only {
        // On standard error, where a command-line user sees it (this binary sets up no
        // logging); the config is then marked open on purpose, so it does not warn again.
        eprintln!(
            "warning: the dashboard on {bind} is open to everyone who reaches it, retry, cancel and delete \
             included: pass --read-only, or put it behind your own authenticating proxy"
        );
    }
    let mut config = crate::config::DashboardConfig::new(driver_for_url(url, 8)?).open_to_everyone();
    if let Some(replica) = replica_url {
        config = config.read_from(driver_for_url(replica, 8)?);
    }
    if read_only {
        config = config.authorize(|_: &actix_web::HttpRequest| crate::access::Access::ReadOnly);
    }
    let mount = mount.trim_end_matches('/').to_owned();
    let scope_path = mount.clone();
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new().service(crate::routes::scope(&scope_path, config.clone()))
    })
    // SIGTERM and SIGINT stop it (actix's signal handling), within 5 s even with browsers'
    // kept-alive connections open: a container's stop waits 10 s before it kills.
    .shutdown_timeout(5)
    .bind(bind)
    .map_err(|e| CliError::Invalid(format!("cannot listen on {bind}: {e}")))?;
    for addr in server.addrs() {
        writeln!(out, "jobs dashboard on http://{addr}{mount}/")?;
    }
    out.flush()?;
    server.run().await?;
    Ok(())
}
