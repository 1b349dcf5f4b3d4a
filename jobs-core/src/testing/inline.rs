//! Inline mode: inside [`inline`], enqueueing runs the job at once instead of inserting it.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::context::{ContextParts, JobContext};
use crate::db::Pool;
use crate::db::jobs::NewJob;
use crate::enqueue::Enqueued;
use crate::error::{Error, Result};
use crate::outcome::RunOutcome;
use crate::registry::Registry;
use crate::state::JobState;
use crate::worker::Drained;

#[derive(Clone)]
struct Inline {
    pool: Pool,
    registry: Registry,
    runs: Arc<Mutex<Vec<Drained>>>,
}

tokio::task_local! {
    static INLINE: Inline;
}

/// Runs `body` in inline mode: every async enqueue inside it (`J::enqueue`, `build(..)
/// .enqueue`, [`enqueue_many`](crate::enqueue_many)) runs the job right away, in this task,
/// instead of inserting a row, and returns id 0. Jobs the handlers enqueue run too.
/// Returns `body`'s output and every run, in order. A handler's panic propagates.
///
/// Handlers get `pool` for their own queries; they do not see the caller's uncommitted
/// writes (the job runs before the caller's transaction commits). Synchronous enqueues
/// (`enqueue_sync`) still insert.
pub async fn inline<F: std::future::Future>(pool: Pool, body: F) -> Result<(F::Output, Vec<Drained>)> {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let state = Inline { pool, registry: Registry::from_inventory()?, runs: runs.clone() };
    let output = INLINE.scope(state, body).await;
    let runs = std::mem::take(&mut *runs.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((output, runs))
}

/// In inline mode, runs `rows` and returns what enqueueing them returns; otherwise `None`.
pub(crate) async fn intercept(rows: &[NewJob]) -> Option<Result<Vec<Enqueued>>> {
    let inline = INLINE.try_with(Inline::clone).ok()?;
    let mut enqueued = Vec::with_capacity(rows.len());
    for row in rows {
        match run(&inline, row).await {
            Ok(drained) => {
                inline.runs.lock().unwrap_or_else(|e| e.into_inner()).push(drained);
                enqueued.push(Enqueued { id: 0, existing: false });
            }
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(enqueued))
}

async fn run(inline: &Inline, row: &NewJob) -> Result<Drained> {
    let descriptor = *inline.registry.get(&row.kind).ok_or_else(|| Error::UnknownKind(row.kind.clone()))?;
    let meta = RawValue::from_string(row.meta.clone()).unwrap_or_default();
    let args = RawValue::from_string(row.args.clone())
        .map_err(|source| Error::EncodeArgs { kind: row.kind.clone(), source })?;
    let ctx = JobContext::new(ContextParts {
        id: 0,
        kind: descriptor.kind,
        queue: Arc::from(row.queue.as_str()),
        attempt: 1,
        max_attempts: row.max_attempts,
        priority: row.priority,
        meta,
        tags: row.tags.clone(),
        node: Arc::from("inline"),
        created_at: chrono::Utc::now(),
        cancel: CancellationToken::new(),
        pool: Some(inline.pool.clone()),
    });
    // Boxed: a handler may enqueue (and so run) jobs itself.
    let future = (descriptor.run)(ctx, &args);
    let outcome = match AssertUnwindSafe(future).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(payload) => std::panic::resume_unwind(payload),
    };
    let error = |f: &crate::outcome::Failure| {
        Some(serde_json::json!({ "attempt": 1, "error_type": f.error_type, "message": f.message }))
    };
    let (state, result, error) = match &outcome {
        RunOutcome::Completed(result) => {
            (JobState::Completed, result.as_deref().and_then(|r| serde_json::from_str(r).ok()), None)
        }
        RunOutcome::Failed(f) if row.max_attempts > 1 => (JobState::Retryable, None, error(f)),
        RunOutcome::Failed(f) | RunOutcome::Discarded(f) => (JobState::Discarded, None, error(f)),
        RunOutcome::Snoozed(_) => (JobState::Scheduled, None, None),
        RunOutcome::Cancelled(reason) => (
            JobState::Cancelled,
            None,
            Some(serde_json::json!({ "attempt": 1, "error_type": "cancelled", "message": reason })),
        ),
    };
    Ok(Drained { id: 0, kind: row.kind.clone(), queue: row.queue.clone(), attempt: 1, state, result, error })
}
