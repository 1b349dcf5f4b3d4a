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

use jobs_driver::{
    Completion, DURATION_BUCKETS, JobCompleteManyParams, JobSettleParams, JobState, KindMetric,
    KindStatsCount, StatsCount, StatsRecordParams, Timing, duration_bucket,
};

use super::completion_channel::CompleterConfig;
use super::shared::Shared;
use crate::retry_pause::RetryPause;

/// Writes `batch`, retrying with backoff while the database is unreachable: an outcome is
/// never dropped because of a transient error, but a hand-back of a run that never started
/// (see [`hand_backs_first`]). Gives up only when `give_up` fires (then the rescuer returns
/// the jobs to the queue).
///
/// A batch the database rejects for another reason is written row by row, so one bad row
/// cannot hold up the others; a row rejected on its own is stored without its result and
/// with a note in place of its error entry.
///
/// Returns the ids whose outcome applied (the others' jobs were rescued or cancelled
/// meanwhile, or the write was given up).
async fn write(shared: &Shared, batch: &[Completion], give_up: &CancellationToken) -> Vec<i64> {
    hand_backs_first(shared, batch);
    let applied = match write_retrying(shared, batch, give_up).await {
        Ok(applied) => applied,
        Err(e) => {
            tracing::error!(error = %e, batch = batch.len(), "the database rejected a batch of outcomes; writing them one by one");
            // Hand-backs are left out: a driver's write is not always one transaction, so
            // they may have applied (see `hand_backs_first`).
            let mut applied = Vec::new();
            for one in batch.iter().filter(|c| !c.give_back_attempt) {
                applied.extend(write_alone(shared, one, give_up).await);
            }
            applied
        }
    };
    forget(shared, batch);
    settle(shared, batch, &applied).await;
    applied
}

/// Settles, for their dependents, the finishes of the workflow steps whose outcome
/// applied: a dependent whose last dependency just completed becomes due now, not at the
/// settler's next pass. (A step that did not finish is skipped by the settle.) Should it
/// fail, the settler's sweep settles them.
async fn settle(shared: &Shared, batch: &[Completion], applied: &[i64]) {
    let steps: Vec<i64> = batch
        .iter()
        .filter(|c| c.workflow_id.is_some() && !c.give_back_attempt && applied.contains(&c.id))
        .map(|c| c.id)
        .collect();
    if steps.is_empty() {
        return;
    }
    let params =
        JobSettleParams { finished: Some(&steps), after: 0, limit: SETTLE_LIMIT, now: shared.clock.db_now() };
    if let Err(e) = shared.driver.job_settle(params).await {
        tracing::warn!(error = %e, steps = steps.len(), "settling finished workflow steps failed; the settler will");
    }
}

/// The most dependents one settle transaction takes.
const SETTLE_LIMIT: usize = 1_000;

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

/// A run that never started gives its attempt number back: the next claim takes the same
/// number. So its hand-back is this node's no longer once it is decided, before it is
/// written: should the node claim the job again at that number meanwhile, the new run is
/// the one held (and [`forget`] leaves it). And it is never written twice: after a lost
/// reply the first write may have applied, and a second one would hand back the new run
/// of that number (this node's or another's). Such a hand-back is dropped instead (unless
/// the write never reached the database: no connection to be had); the job, still
/// `running` under this node, is released by the orphan check.
fn hand_backs_first(shared: &Shared, batch: &[Completion]) {
    let mut held = shared.held.lock().unwrap_or_else(|e| e.into_inner());
    for c in batch.iter().filter(|c| c.give_back_attempt) {
        held.remove(&(c.id, c.attempt));
    }
}

/// The jobs are no longer this node's to report: they leave the set the orphan check
/// treats as held (hand-backs left it before, see [`hand_backs_first`]), and their
/// queue's ended runs (the write is done: the row no longer counts as running, or the
/// run is no longer the row's; hand-backs never enter them).
fn forget(shared: &Shared, batch: &[Completion]) {
    {
        let mut held = shared.held.lock().unwrap_or_else(|e| e.into_inner());
        for c in batch.iter().filter(|c| !c.give_back_attempt) {
            held.remove(&(c.id, c.attempt));
        }
    }
    for c in batch.iter().filter(|c| !c.give_back_attempt) {
        if let Some(queue) = shared.queues.get(&*c.queue) {
            queue.ended.lock().unwrap_or_else(|e| e.into_inner()).remove(&(c.id, c.attempt));
        }
    }
}

/// One write of `batch`, retried while the error is the connection's. Returns the ids that
/// applied, or the database's error when it rejects the statement itself.
async fn write_retrying(
    shared: &Shared,
    batch: &[Completion],
    give_up: &CancellationToken,
) -> Result<Vec<i64>, crate::error::Error> {
    let mut pause = RetryPause::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut retried: Vec<Completion>;
    let mut batch = batch;
    loop {
        let params = JobCompleteManyParams { completions: batch, now: shared.clock.db_now() };
        match shared.driver.job_complete_many(params).await.map_err(crate::error::Error::from) {
            Ok(applied) => {
                if applied.len() < batch.len() {
                    tracing::info!(
                        skipped = batch.len() - applied.len(),
                        "outcomes ignored: their jobs were rescued or cancelled meanwhile"
                    );
                }
                ::metrics::counter!(crate::metrics::COMPLETION_BATCHES).increment(1);
                return Ok(applied);
            }
            Err(e) if !e.is_connection_error() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, batch = batch.len(), "writing outcomes failed; retrying");
                if !e.sent_nothing() && batch.iter().any(|c| c.give_back_attempt) {
                    // The write may have applied: never write a hand-back twice.
                    retried = batch.iter().filter(|c| !c.give_back_attempt).cloned().collect();
                    batch = &retried;
                    if batch.is_empty() {
                        return Ok(Vec::new());
                    }
                }
                if !pause.sleep_unless(give_up).await {
                    tracing::error!(
                        batch = batch.len(),
                        "gave up writing outcomes at shutdown; the rescuer will retry these jobs"
                    );
                    return Ok(Vec::new());
                }
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
    /// Per kind and minute: outcomes and duration histograms (`job_kind_stats`).
    kinds: HashMap<(DateTime<Utc>, &'static str), KindCounts>,
    /// When the oldest unwritten count was added.
    since: Option<Instant>,
}

/// One kind's counts in one minute.
#[derive(Default)]
struct KindCounts {
    /// Completed, retried, discarded, cancelled.
    outcomes: [i64; 4],
    run: [i64; DURATION_BUCKETS],
    wait: [i64; DURATION_BUCKETS],
}

impl KindCounts {
    fn add(&mut self, c: &Completion, timing: &Timing) {
        let outcome = match c.state {
            JobState::Completed => Some(0),
            JobState::Retryable => Some(1),
            JobState::Discarded => Some(2),
            JobState::Cancelled => Some(3),
            _ => None,
        };
        if let Some(i) = outcome {
            self.outcomes[i] += 1;
        }
        self.run[duration_bucket(timing.run_ms)] += 1;
        self.wait[duration_bucket(timing.wait_ms)] += 1;
    }

    /// Its non-zero counters.
    fn rows<'a>(&self, minute: DateTime<Utc>, kind: &'a str, out: &mut Vec<KindStatsCount<'a>>) {
        let outcomes =
            [KindMetric::Completed, KindMetric::Retried, KindMetric::Discarded, KindMetric::Cancelled];
        for (metric, count) in outcomes.into_iter().zip(self.outcomes) {
            if count > 0 {
                out.push(KindStatsCount { minute, kind, metric, idx: 0, count });
            }
        }
        for (metric, histogram) in [(KindMetric::RunMs, &self.run), (KindMetric::WaitMs, &self.wait)] {
            for (idx, count) in histogram.iter().enumerate() {
                if *count > 0 {
                    let idx = i16::try_from(idx).unwrap_or(i16::MAX);
                    out.push(KindStatsCount { minute, kind, metric, idx, count: *count });
                }
            }
        }
    }
}

impl PendingStats {
    /// Adds the applied outcomes of `batch`, in the current minute.
    fn add(&mut self, shared: &Shared, batch: &[Completion], applied: &[i64]) {
        if applied.is_empty() {
            return;
        }
        let now = shared.clock.now();
        let minute = now.duration_trunc(chrono::TimeDelta::minutes(1)).unwrap_or(now);
        let kinds = &mut self.kinds;
        let mut count = |c: &Completion| {
            *self.counts.entry((minute, c.queue.clone(), c.state)).or_insert(0) += 1;
            if let Some(timing) = &c.timing {
                kinds.entry((minute, timing.kind)).or_default().add(c, timing);
            }
        };
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
        if self.counts.is_empty() && self.kinds.is_empty() {
            self.since = None;
            return;
        }
        let counts: Vec<StatsCount<'_>> = self
            .counts
            .iter()
            .map(|((minute, queue, state), n)| StatsCount {
                minute: *minute,
                queue,
                state: *state,
                count: *n,
            })
            .collect();
        let mut kinds = Vec::new();
        for ((minute, kind), counts) in &self.kinds {
            counts.rows(*minute, kind, &mut kinds);
        }
        let written = shared.driver.stats_record(StatsRecordParams { counts: &counts, kinds: &kinds }).await;
        match written {
            Ok(()) => {
                self.counts.clear();
                self.kinds.clear();
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
