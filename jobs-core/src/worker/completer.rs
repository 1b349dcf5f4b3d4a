//! Writing outcomes back in batches: whatever has queued up while the previous write was
//! in flight goes out in the next single statement. The per-minute outcome counters
//! (`job_stats`) are added up here and written at most once per [`STATS_EVERY`], not with
//! every batch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::runtime::Shared;
use crate::db;
use crate::db::execution::Completion;
use crate::state::JobState;

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
///
/// Returns the ids whose outcome applied (the others' jobs were rescued or cancelled
/// meanwhile, or the write was given up).
async fn write(shared: &Shared, batch: &[Completion], give_up: &CancellationToken) -> Vec<i64> {
    let applied = match write_retrying(shared, batch, give_up).await {
        Ok(applied) => applied,
        Err(e) if batch.len() > 1 => {
            tracing::error!(error = %e, batch = batch.len(), "the database rejected a batch of outcomes; writing them one by one");
            let mut applied = Vec::new();
            for one in batch {
                applied.extend(write_alone(shared, one, give_up).await);
            }
            applied
        }
        Err(_) => write_alone(shared, &batch[0], give_up).await,
    };
    forget(shared, batch);
    applied
}

async fn write_alone(shared: &Shared, completion: &Completion, give_up: &CancellationToken) -> Vec<i64> {
    let e = match write_retrying(shared, std::slice::from_ref(completion), give_up).await {
        Ok(applied) => return applied,
        Err(e) => e,
    };
    tracing::error!(job.id = completion.id, error = %e, "the database rejected a job's outcome; storing it without result or error text");
    let note = serde_json::json!({
        "attempt": completion.attempt,
        "error_type": "unstorable_outcome",
        "message": format!("the outcome could not be stored: {e}"),
    });
    let plain = Completion { result: None, error: Some(note.to_string()), ..completion.clone() };
    write_retrying(shared, std::slice::from_ref(&plain), give_up).await.unwrap_or_else(|e| {
        tracing::error!(job.id = completion.id, error = %e, "dropping an outcome the database keeps rejecting; the job is released as orphaned");
        Vec::new()
    })
}

/// The jobs are no longer this node's to report: they leave the set the orphan check
/// treats as held.
fn forget(shared: &Shared, batch: &[Completion]) {
    let mut held = shared.held.lock().unwrap_or_else(|e| e.into_inner());
    for c in batch {
        held.remove(&c.id);
    }
}

/// One write of `batch`, retried while the error is the connection's. Returns the ids that
/// applied, or the database's error when it rejects the statement itself.
async fn write_retrying(
    shared: &Shared,
    batch: &[Completion],
    give_up: &CancellationToken,
) -> Result<Vec<i64>, crate::Error> {
    let mut pause = Duration::from_millis(50);
    loop {
        let result = async {
            let mut conn = shared.pool.get().await?;
            db::execution::complete_many(&mut conn, batch, shared.clock.db_now()).await
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
                return Ok(applied);
            }
            Err(e) if !e.is_connection_error() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, batch = batch.len(), "writing outcomes failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = give_up.cancelled() => {
                        tracing::error!(batch = batch.len(), "gave up writing outcomes at shutdown; the rescuer will retry these jobs");
                        return Ok(Vec::new());
                    }
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// How often the completer adds its outcome counts to `job_stats` while jobs complete.
pub(crate) const STATS_EVERY: Duration = Duration::from_secs(1);

/// Outcome counts not yet written to `job_stats`, by minute, queue and state. Kept across
/// failed writes (a few entries per minute and queue), so an outage delays the counters
/// rather than losing them.
#[derive(Default)]
struct PendingStats {
    counts: HashMap<(DateTime<Utc>, Arc<str>, JobState), i64>,
    /// When the oldest unwritten count was added.
    since: Option<Instant>,
}

impl PendingStats {
    /// Adds the applied outcomes of `batch`, in the current minute.
    fn add(&mut self, shared: &Shared, batch: &[Completion], applied: &[i64]) {
        if applied.is_empty() {
            return;
        }
        let now = shared.clock.now();
        let minute = now.duration_trunc(chrono::TimeDelta::minutes(1)).unwrap_or(now);
        let mut count =
            |c: &Completion| *self.counts.entry((minute, c.queue.clone(), c.state)).or_insert(0) += 1;
        if applied.len() == batch.len() {
            // The common case: every outcome applied.
            batch.iter().for_each(&mut count);
        } else {
            let applied: rustc_hash::FxHashSet<i64> = applied.iter().copied().collect();
            batch.iter().filter(|c| applied.contains(&c.id)).for_each(&mut count);
        }
        self.since.get_or_insert_with(Instant::now);
    }

    /// When the counts are due to be written, if there are any.
    fn due_at(&self) -> Option<Instant> {
        self.since.map(|since| since + STATS_EVERY)
    }

    /// Writes the counts in one statement. Best effort: a failure is logged and the counts
    /// wait for the next write.
    async fn write(&mut self, shared: &Shared) {
        if self.counts.is_empty() {
            self.since = None;
            return;
        }
        let counts: Vec<(DateTime<Utc>, &str, JobState, i64)> =
            self.counts.iter().map(|((minute, queue, state), n)| (*minute, &**queue, *state, *n)).collect();
        let written = async {
            let mut conn = shared.pool.get().await?;
            db::stats::record(&mut conn, &counts).await
        }
        .await;
        match written {
            Ok(()) => {
                self.counts.clear();
                self.since = None;
            }
            Err(e) => {
                tracing::debug!(error = %e, "recording outcome counters failed; retrying with the next write");
                self.since = Some(Instant::now());
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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
    let mut stats = PendingStats::default();
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, config.max_batch) => {
                if n == 0 {
                    break;
                }
                let applied = write(&shared, &batch, &give_up).await;
                stats.add(&shared, &batch, &applied);
                batch.clear();
            }
            _ = sleep_until(stats.due_at()) => stats.write(&shared).await,
            _ = stop.cancelled() => {
                // Every executor has finished: drain what is left.
                while let Ok(completion) = rx.try_recv() {
                    batch.push(completion);
                    if batch.len() == config.max_batch {
                        let applied = write(&shared, &batch, &give_up).await;
                        stats.add(&shared, &batch, &applied);
                        batch.clear();
                    }
                }
                if !batch.is_empty() {
                    let applied = write(&shared, &batch, &give_up).await;
                    stats.add(&shared, &batch, &applied);
                }
                break;
            }
        }
    }
    stats.write(&shared).await;
}
