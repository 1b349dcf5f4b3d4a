//! The state the worker's tasks share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustc_hash::FxHashSet;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

use jobs_driver::{Driver, QueueSettings, QueueSettingsParams};

use super::buffer::{Buffer, Buffered};
use super::completion_channel::CompletionSender;
use super::concurrency::Limit;
use super::config::{QueueConfig, UnknownKindPolicy};
use super::prefetch::{Prefetch, RunTime};
use super::running_jobs::{Run, Runs};
use crate::clock::Clock;
use crate::registry::Registry;

/// How many jobs one claim asks for: the queue's slots shared among the claims in
/// flight, capped by `max_fetch`.
pub(crate) fn batch_size(concurrency: usize, claims_in_flight: usize, max_fetch: usize) -> usize {
    concurrency.div_ceil(claims_in_flight.max(1)).clamp(1, max_fetch.max(1))
}

/// Tunables every task reads.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    pub(crate) poll_interval: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) claims_in_flight: usize,
    pub(crate) max_fetch: usize,
    pub(crate) fetch_cooldown: Duration,
    /// A buffered job waiting this long goes back to the table.
    pub(crate) prefetch_max_wait: Duration,
    pub(crate) orphan_grace: Duration,
    pub(crate) unknown_kinds: UnknownKindPolicy,
    /// A node silent this long is gone (the rescuer's setting): how long a starting node
    /// waits for a heartbeat under its name to go stale where it holds no liveness lock.
    pub(crate) node_stale_after: Duration,
}

/// One queue as this node runs it.
#[derive(Debug)]
pub(crate) struct QueueRuntime {
    pub(crate) name: Arc<str>,
    /// The queue name as a `'static` metrics label (leaked once per queue per worker).
    pub(crate) label: &'static str,
    pub(crate) config: QueueConfig,
    /// One permit per concurrency slot.
    pub(crate) slots: Arc<Semaphore>,
    /// How many slots: the configured concurrency, or the cluster's setting.
    pub(crate) limit: Limit,
    /// Rung when jobs may have become available (NOTIFY, reconnect, resume).
    pub(crate) wake: Notify,
    /// How many jobs one claim asks for (see `producer::batch_size`), for the queue's
    /// current slots: set again when the cluster's setting changes them.
    pub(crate) batch: AtomicUsize,
    /// Slots freed since the producer last started a claim; see [`QueueRuntime::free_slot`].
    pub(crate) freed: AtomicUsize,
    /// Rung when the first slot frees after the producer started a claim, when a batch's
    /// worth has freed, and when the buffer falls to its low-water mark: the moments the
    /// producer may act on.
    pub(crate) slot_freed: Notify,
    /// Claimed jobs waiting for a slot (see `buffer`).
    pub(crate) buffer: Mutex<Buffer>,
    /// How the buffer is sized.
    pub(crate) prefetch: Prefetch,
    /// The mean run time of this queue's jobs here (the buffer's size follows it).
    pub(crate) run_time: RunTime,
    /// The producer refills the buffer when it holds this many or fewer.
    pub(crate) low_water: AtomicUsize,
    pub(crate) paused: AtomicBool,
    /// The queue has cluster-wide limits (a global or a rate limit) as of the last read
    /// of its settings: claims run under them ([`jobs_driver::JobClaimParams::limited`])
    /// and ask only for free slots, nothing buffered.
    pub(crate) limited: AtomicBool,
    /// The limits this worker declares for the queue (see `QueueConfig::limits`).
    pub(crate) declared: jobs_driver::DeclaredLimits,
    /// While the queue is limited: the runs whose handler ended here and whose outcome is
    /// not written yet. They run nothing, so its claims leave them out of what runs
    /// ([`jobs_driver::JobClaimParams::ended`]): a job ending frees its room under the
    /// limits at once, not when the completer's write lands. Entered before the run's slot
    /// frees (the claim that slot leads to sees it), left once the write is done.
    pub(crate) ended: Mutex<FxHashSet<Run>>,
    /// Claim statements issued for this queue.
    pub(crate) fetches: AtomicU64,
}

impl QueueRuntime {
    /// Gives a slot back. Wakes the producer only when it may act: at the first slot freed
    /// since its last claim (to start its cooldown) and when a batch's worth has freed, not
    /// once per job.
    pub(crate) fn free_slot(&self, permit: OwnedSemaphorePermit) {
        if self.limit.take_owed() {
            // The concurrency was lowered: this slot is gone, not freed.
            permit.forget();
            return;
        }
        drop(permit);
        let freed = self.freed.fetch_add(1, Ordering::AcqRel) + 1;
        // A limited queue's producer may be waiting for room under its limits, which any
        // job ending here makes.
        if freed == 1 || freed == self.batch.load(Ordering::Relaxed) || self.limited.load(Ordering::Relaxed) {
            self.slot_freed.notify_one();
        }
    }

    /// The next buffered job for an executor whose job just finished, or, when none waits
    /// (or the buffer is closed), its slot given back. Both under the buffer's lock: a
    /// claim's jobs pushed meanwhile either come out here or find the slot free when the
    /// producer starts them, never neither. Wakes the producer when the buffer falls to
    /// its low-water mark.
    pub(crate) fn next_or_free(
        &self,
        permit: OwnedSemaphorePermit,
    ) -> Option<(Buffered, OwnedSemaphorePermit)> {
        if self.limit.take_owed() {
            // The concurrency was lowered: this slot is gone; start no other job on it.
            permit.forget();
            return None;
        }
        let mut buffer = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let Some(next) = buffer.pop() else {
            self.free_slot(permit);
            return None;
        };
        if buffer.len() <= self.low_water.load(Ordering::Relaxed) {
            self.slot_freed.notify_one();
        }
        Some((next, permit))
    }

    /// Takes in the queue's stored settings (`None`: nothing stored): its pause flag, its
    /// limits, and the concurrency set for the cluster, to which the claims' size follows.
    /// Returns whether the concurrency changed.
    pub(crate) fn apply_settings(&self, stored: Option<&QueueSettings>, config: &RuntimeConfig) -> bool {
        self.paused.store(stored.is_some_and(|s| s.paused), Ordering::Release);
        let limited = self.declared.any() || stored.is_some_and(QueueSettings::limited);
        self.limited.store(limited, Ordering::Release);
        let cluster = stored.and_then(|s| s.concurrency).and_then(|n| usize::try_from(n).ok());
        let changed = self.limit.set(cluster, &self.slots);
        let batch = batch_size(self.limit.current(), config.claims_in_flight, config.max_fetch);
        self.batch.store(batch, Ordering::Relaxed);
        changed
    }

    /// Re-reads the queue's stored settings: its pause flag (a missed notification must
    /// not pause or resume it forever), its limits, and the concurrency set for the
    /// cluster, if any.
    pub(crate) async fn refresh_settings(&self, shared: &Shared) {
        let stored = shared.driver.queue_settings(QueueSettingsParams { queue: Some(&self.name) }).await;
        match stored {
            Ok(stored) => {
                if self.apply_settings(stored.first(), &shared.config) {
                    tracing::info!(queue = %self.name, concurrency = self.limit.current(), "concurrency changed");
                }
            }
            Err(e) => tracing::warn!(queue = %self.name, error = %e, "reading the queue's settings failed"),
        }
    }

    /// Records a run whose handler ended here, its outcome not yet written, when the
    /// queue is limited (see [`QueueRuntime::ended`]).
    pub(crate) fn run_ended(&self, run: Run) {
        if self.limited.load(Ordering::Acquire) {
            self.ended.lock().unwrap_or_else(|e| e.into_inner()).insert(run);
        }
    }

    /// The runs that ended here with their outcome not yet written, for a claim under the
    /// queue's limits (none when it has none).
    pub(crate) fn ended_runs(&self) -> Vec<Run> {
        if !self.limited.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.ended.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect()
    }

    /// How many claimed jobs wait for a slot.
    pub(crate) fn buffered(&self) -> usize {
        self.buffer.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Everything shared by the producers, executors, completer, listener and heartbeat.
pub(crate) struct Shared {
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) registry: Registry,
    /// The application's values for the jobs (`WorkerBuilder::data`).
    pub(crate) data: crate::data::AppData,
    /// The run middleware, outermost first (`WorkerBuilder::middleware`).
    pub(crate) middleware: crate::middleware::RunChain,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) node: Arc<str>,
    pub(crate) host: String,
    pub(crate) pid: i32,
    pub(crate) config: RuntimeConfig,
    pub(crate) queues: HashMap<String, Arc<QueueRuntime>>,
    /// The runs this node holds in memory, running or buffered, with their cancellation
    /// handles, by (job, attempt) (hashed with `FxHash`, as every run is inserted and
    /// removed once: SipHash was 5 % of a worker's CPU in the burn-down).
    pub(crate) running: Mutex<Runs>,
    /// Runs this node claimed and has not yet reported: running, or with an outcome
    /// waiting to be written. A `running` row of this node at a (job, attempt) outside this
    /// set is orphaned (its claim's reply was lost with the connection).
    pub(crate) held: Mutex<FxHashSet<Run>>,
    pub(crate) tracker: TaskTracker,
    pub(crate) completions: CompletionSender,
    /// Whether notifications arrive (the driver's listener is connected). While they do
    /// not, the heartbeat asks for cancellations of the jobs this node runs.
    pub(crate) listening: AtomicBool,
    /// The key of the node's liveness lock, which its heartbeats record (`None`: the
    /// driver holds none, or the node lost it to another process).
    pub(crate) lock_key: Mutex<Option<String>>,
    /// Whether the node holds its name: false once another process took its liveness lock
    /// (then the node releases no orphans: the name's running jobs may be the other's).
    pub(crate) owns_name: AtomicBool,
}

#[cfg(test)]
mod tests {
    use super::batch_size;

    #[test]
    fn a_claim_asks_for_its_share_of_the_slots() {
        assert_eq!(batch_size(100, 2, 1_000), 50);
        assert_eq!(batch_size(101, 2, 1_000), 51);
        assert_eq!(batch_size(400, 2, 100), 100);
        assert_eq!(batch_size(1, 2, 1_000), 1);
        assert_eq!(batch_size(10, 1, 1_000), 10);
        assert_eq!(batch_size(10, 0, 0), 1);
    }
}
