//! The state the worker's tasks share.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::{Notify, Semaphore};
use tokio_util::task::TaskTracker;

use jobs_driver::Driver;

use super::completions::CompletionSender;
use super::config::{QueueConfig, UnknownKindPolicy};
use super::running::RunningJob;
use crate::clock::Clock;
use crate::registry::Registry;

/// Tunables every task reads.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    pub(crate) poll_interval: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) claims_in_flight: usize,
    pub(crate) fetch_cooldown: Duration,
    pub(crate) orphan_grace: Duration,
    pub(crate) unknown_kinds: UnknownKindPolicy,
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
    /// Rung when jobs may have become available (NOTIFY, reconnect, resume).
    pub(crate) wake: Notify,
    /// How many jobs one claim asks for (see `producer::batch_size`).
    pub(crate) batch: usize,
    /// Slots freed since the producer last started a claim; see [`QueueRuntime::free_slot`].
    pub(crate) freed: AtomicUsize,
    /// Rung when the first slot frees after the producer started a claim, and when a
    /// batch's worth has freed: the two moments it may act on.
    pub(crate) slot_freed: Notify,
    pub(crate) paused: AtomicBool,
    /// Claim statements issued for this queue.
    pub(crate) fetches: AtomicU64,
}

impl QueueRuntime {
    /// Gives a slot back. Wakes the producer only when it may act: at the first slot freed
    /// since its last claim (to start its cooldown) and when a batch's worth has freed, not
    /// once per job.
    pub(crate) fn free_slot(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        drop(permit);
        let freed = self.freed.fetch_add(1, Ordering::AcqRel) + 1;
        if freed == 1 || freed == self.batch {
            self.slot_freed.notify_one();
        }
    }
}

/// Everything shared by the producers, executors, completer, listener and heartbeat.
pub(crate) struct Shared {
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) registry: Registry,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) node: Arc<str>,
    pub(crate) host: String,
    pub(crate) pid: i32,
    pub(crate) config: RuntimeConfig,
    pub(crate) queues: HashMap<String, Arc<QueueRuntime>>,
    /// Keyed by job id; hashed with `FxHash`, as every job is inserted and removed once
    /// (SipHash was 5 % of a worker's CPU in the burn-down).
    pub(crate) running: Mutex<FxHashMap<i64, RunningJob>>,
    /// Jobs this node claimed and has not yet reported: running, or with an outcome
    /// waiting to be written. A `running` row of this node outside this set is orphaned
    /// (its claim's reply was lost with the connection).
    pub(crate) held: Mutex<FxHashSet<i64>>,
    pub(crate) tracker: TaskTracker,
    pub(crate) completions: CompletionSender,
    /// Whether notifications arrive (the driver's listener is connected). While they do
    /// not, the heartbeat asks for cancellations of the jobs this node runs.
    pub(crate) listening: AtomicBool,
}
