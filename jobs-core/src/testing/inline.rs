//! Inline mode: inside [`inline`], enqueueing runs the job at once instead of inserting it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::db::Pool;
use crate::db::jobs::NewJob;
use crate::enqueue::Enqueued;
use crate::error::{Error, Result};
use crate::registry::Registry;
use crate::worker::{Drained, Worker};

#[derive(Clone)]
struct Inline {
    pool: Pool,
    registry: Registry,
    /// One unstarted worker per queue met, to run that queue's jobs through.
    workers: Arc<Mutex<HashMap<String, Arc<Worker>>>>,
    runs: Arc<Mutex<Vec<Drained>>>,
}

tokio::task_local! {
    static INLINE: Inline;
}

/// Runs `body` in inline mode: every async enqueue inside it (`J::enqueue`, `build(..)
/// .enqueue`, [`enqueue_many`](crate::enqueue_many)) runs the job right away, in this task,
/// through the worker's own run path (a panic or timeout is recorded as the failed
/// attempt, as a worker would), instead of inserting a row, and returns id 0. Jobs the
/// handlers enqueue run too. Returns `body`'s output and every run, in order. Enqueueing a
/// kind this binary does not register fails with [`Error::UnknownKind`].
///
/// Handlers get `pool` for their own queries; they do not see the caller's uncommitted
/// writes (the job runs before the caller's transaction commits). Synchronous enqueues
/// (`enqueue_sync`) still insert.
pub async fn inline<F: std::future::Future>(pool: Pool, body: F) -> Result<(F::Output, Vec<Drained>)> {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let state =
        Inline { pool, registry: Registry::from_inventory()?, workers: Arc::default(), runs: runs.clone() };
    let output = INLINE.scope(state, body).await;
    let runs = std::mem::take(&mut *runs.lock().unwrap_or_else(|e| e.into_inner()));
    Ok((output, runs))
}

/// In inline mode, runs `rows` and returns what enqueueing them returns; otherwise `None`.
pub(crate) async fn intercept(rows: &[NewJob]) -> Option<Result<Vec<Enqueued>>> {
    let inline = INLINE.try_with(Inline::clone).ok()?;
    let mut enqueued = Vec::with_capacity(rows.len());
    for row in rows {
        match inline.run(row).await {
            Ok(drained) => {
                inline.runs.lock().unwrap_or_else(|e| e.into_inner()).push(drained);
                enqueued.push(Enqueued { id: 0, existing: false });
            }
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(enqueued))
}

impl Inline {
    /// The worker for `queue`, built on first use.
    fn worker(&self, queue: &str) -> Result<Arc<Worker>> {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(worker) = workers.get(queue) {
            return Ok(worker.clone());
        }
        let worker = Arc::new(
            Worker::builder(self.pool.clone())
                .queue(queue, 1)
                .node_name("inline")
                .registry(self.registry.clone())
                .without_maintenance()
                .listen(false)
                .build()?,
        );
        workers.insert(queue.to_owned(), worker.clone());
        Ok(worker)
    }

    async fn run(&self, row: &NewJob) -> Result<Drained> {
        if self.registry.get(&row.kind).is_none() {
            return Err(Error::UnknownKind(row.kind.to_string()));
        }
        let worker = self.worker(&row.queue)?;
        worker
            .perform_unsaved(row)
            .await
            .ok_or_else(|| Error::Runtime(format!("no inline worker for queue `{}`", row.queue)))
    }
}
