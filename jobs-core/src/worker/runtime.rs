//! The state the worker's tasks share.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::task::TaskTracker;

use super::completer::CompletionSender;
use super::config::{QueueConfig, UnknownKindPolicy};
use super::executor::RunningJob;
use crate::clock::Clock;
use crate::db::Pool;
use crate::registry::Registry;

/// Tunables every task reads.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeConfig {
    pub(crate) poll_interval: Duration,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) max_fetch: usize,
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
    /// Rung when an executor frees a slot.
    pub(crate) slot_freed: Notify,
    pub(crate) paused: AtomicBool,
    /// Claim statements issued for this queue.
    pub(crate) fetches: AtomicU64,
}

/// Everything shared by the producers, executors, completer, listener and heartbeat.
pub(crate) struct Shared {
    pub(crate) pool: Pool,
    pub(crate) registry: Registry,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) node: Arc<str>,
    pub(crate) host: String,
    pub(crate) pid: i32,
    pub(crate) config: RuntimeConfig,
    pub(crate) queues: HashMap<String, Arc<QueueRuntime>>,
    pub(crate) running: Mutex<HashMap<i64, RunningJob>>,
    /// Jobs this node claimed and has not yet reported: running, or with an outcome
    /// waiting to be written. A `running` row of this node outside this set is orphaned
    /// (its claim's reply was lost with the connection).
    pub(crate) held: Mutex<HashSet<i64>>,
    pub(crate) tracker: TaskTracker,
    pub(crate) completions: CompletionSender,
    pub(crate) listening: AtomicBool,
}
