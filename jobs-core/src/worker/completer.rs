//! Writing outcomes back in batches: whatever has queued up while the previous write was
//! in flight goes out in the next single statement.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::runtime::Shared;
use crate::db;
use crate::db::execution::Completion;

/// The executors' side of the completer.
#[derive(Debug, Clone)]
pub(crate) struct CompletionSender {
    tx: mpsc::Sender<Completion>,
}

impl CompletionSender {
    /// Queues an outcome for writing. Waits when the completer is far behind.
    pub(crate) async fn submit(&self, completion: Completion) {
        if let Err(e) = self.tx.send(completion).await {
            // Only after the completer stopped, which happens once every job finished.
            tracing::error!(
                job.id = e.0.id,
                "completion arrived after the completer stopped; the rescuer will retry the job"
            );
        }
    }
}

/// The completer's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompleterConfig {
    /// The most outcomes written in one statement.
    pub(crate) max_batch: usize,
    /// The channel's capacity.
    pub(crate) capacity: usize,
}

impl Default for CompleterConfig {
    fn default() -> Self {
        CompleterConfig { max_batch: 2_000, capacity: 10_000 }
    }
}

/// Creates the channel.
pub(crate) fn channel(config: CompleterConfig) -> (CompletionSender, mpsc::Receiver<Completion>) {
    let (tx, rx) = mpsc::channel(config.capacity);
    (CompletionSender { tx }, rx)
}

/// Writes `batch`, retrying with backoff while the database is unreachable: an outcome is
/// never dropped because of a transient error. Gives up only when `give_up` fires (then the
/// rescuer returns the jobs to the queue).
///
/// A batch the database rejects for another reason is written row by row, so one bad row
/// cannot hold up the others; a row rejected on its own is stored without its result and
/// with a note in place of its error entry.
async fn write(shared: &Shared, batch: &[Completion], give_up: &CancellationToken) {
    match write_retrying(shared, batch, give_up).await {
        Ok(()) => {}
        Err(e) if batch.len() > 1 => {
            tracing::error!(error = %e, batch = batch.len(), "the database rejected a batch of outcomes; writing them one by one");
            for one in batch {
                write_alone(shared, one, give_up).await;
            }
        }
        Err(_) => write_alone(shared, &batch[0], give_up).await,
    }
    forget(shared, batch);
}

async fn write_alone(shared: &Shared, completion: &Completion, give_up: &CancellationToken) {
    let Err(e) = write_retrying(shared, std::slice::from_ref(completion), give_up).await else {
        return;
    };
    tracing::error!(job.id = completion.id, error = %e, "the database rejected a job's outcome; storing it without result or error text");
    let note = serde_json::json!({
        "attempt": completion.attempt,
        "error_type": "unstorable_outcome",
        "message": format!("the outcome could not be stored: {e}"),
    });
    let plain = Completion { result: None, error: Some(note.to_string()), ..completion.clone() };
    if let Err(e) = write_retrying(shared, std::slice::from_ref(&plain), give_up).await {
        tracing::error!(job.id = completion.id, error = %e, "dropping an outcome the database keeps rejecting; the job is released as orphaned");
    }
}

/// The jobs are no longer this node's to report: they leave the set the orphan check
/// treats as held.
fn forget(shared: &Shared, batch: &[Completion]) {
    let mut held = shared.held.lock().unwrap_or_else(|e| e.into_inner());
    for c in batch {
        held.remove(&c.id);
    }
}

/// One statement for `batch`, retried while the error is the connection's. Returns the
/// database's error when it rejects the statement itself.
async fn write_retrying(
    shared: &Shared,
    batch: &[Completion],
    give_up: &CancellationToken,
) -> Result<(), crate::Error> {
    let mut pause = Duration::from_millis(50);
    loop {
        let result = async {
            let mut conn = shared.pool.get().await?;
            let now = shared.clock.db_now();
            let applied = db::execution::complete_many(&mut conn, batch, now).await?;
            // Best effort, on the same connection: a failure is logged, never retried, and
            // never holds up completions.
            if let Err(e) = db::stats::record(&mut conn, &outcome_counts(batch, &applied), now).await {
                tracing::debug!(error = %e, "recording outcome counters failed");
            }
            Ok::<_, crate::Error>(applied)
        }
        .await;
        match result {
            Ok(applied) => {
                if applied.len() < batch.len() {
                    tracing::info!(
                        skipped = batch.len() - applied.len(),
                        "outcomes ignored: their jobs were rescued or cancelled meanwhile"
                    );
                }
                metrics::counter!("jobs_completion_batches_total").increment(1);
                return Ok(());
            }
            Err(e) if !e.is_connection_error() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, batch = batch.len(), "writing outcomes failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = give_up.cancelled() => {
                        tracing::error!(batch = batch.len(), "gave up writing outcomes at shutdown; the rescuer will retry these jobs");
                        return Ok(());
                    }
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// The applied outcomes per queue and state, for the per-minute counters.
fn outcome_counts<'a>(batch: &'a [Completion], applied: &[i64]) -> Vec<(&'a str, crate::JobState, i64)> {
    let applied: std::collections::HashSet<i64> = applied.iter().copied().collect();
    let mut counts: std::collections::HashMap<(&str, crate::JobState), i64> =
        std::collections::HashMap::new();
    for c in batch.iter().filter(|c| applied.contains(&c.id)) {
        *counts.entry((&*c.queue, c.state)).or_insert(0) += 1;
    }
    counts.into_iter().map(|((q, s), n)| (q, s, n)).collect()
}

/// The completer loop. Ends after `stop` fires and everything queued was written.
pub(crate) async fn run(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Completion>,
    config: CompleterConfig,
    stop: CancellationToken,
    give_up: CancellationToken,
) {
    let mut batch = Vec::with_capacity(config.max_batch);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, config.max_batch) => {
                if n == 0 {
                    break;
                }
                write(&shared, &batch, &give_up).await;
                batch.clear();
            }
            _ = stop.cancelled() => {
                // Every executor has finished: drain what is left.
                while let Ok(completion) = rx.try_recv() {
                    batch.push(completion);
                    if batch.len() == config.max_batch {
                        write(&shared, &batch, &give_up).await;
                        batch.clear();
                    }
                }
                if !batch.is_empty() {
                    write(&shared, &batch, &give_up).await;
                }
                break;
            }
        }
    }
}
