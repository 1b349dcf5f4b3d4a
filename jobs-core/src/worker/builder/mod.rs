//! Configuring a worker: [`WorkerBuilder`], whose `build()` checks every setting (the
//! worker's and its services') and wires the shared state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobs_driver::{Capability, DeclaredLimits, Driver};
use tokio::sync::{Notify, Semaphore};
use tokio_util::task::TaskTracker;

use super::completion_channel::{self, CompleterConfig};
use super::concurrency::Limit;
use super::config::{QueueConfig, UnknownKindPolicy};
use super::prefetch::{Prefetch, RunTime};
use super::startup::{Maintenance, Worker};

use super::shared::{self, QueueRuntime, RuntimeConfig, Shared};
use crate::clock::{Clock, SystemClock};
use crate::cron::Periodic;
use crate::data::AppData;
use crate::error::Result;
use crate::into_driver::IntoDriver;
use crate::maintenance::{
    ArchiverConfig, CronConfig, CronEnqueuer, LeaderConfig, PrunerConfig, RescuerConfig, SchedulerConfig,
    SettlerConfig,
};
use crate::middleware::RunMiddleware;
use crate::registry::Registry;
mod checks;
mod data;
mod maintenance;
mod middleware;

impl Worker {
    /// Starts configuring a worker on `driver`: a [`Driver`](jobs_driver::Driver), or a
    /// pool a driver wraps (today's `Worker::builder(pool)`). Size the pool for the
    /// queues' claims, the completer, the heartbeat, the listener, and the connections
    /// jobs take themselves.
    pub fn builder(driver: impl IntoDriver) -> WorkerBuilder {
        WorkerBuilder::new(driver.into_driver())
    }
}

/// Builds a [`Worker`]: `Worker::builder(pool).queue("default", 20).build()?`.
#[must_use = "a builder does nothing until built and started"]
pub struct WorkerBuilder {
    driver: Arc<dyn Driver>,
    queues: Vec<QueueConfig>,
    node: Option<String>,
    poll_interval: Duration,
    heartbeat_interval: Duration,
    shutdown_timeout: Duration,
    max_fetch: usize,
    claims_in_flight: usize,
    fetch_cooldown: Duration,
    prefetch_window: Duration,
    prefetch_max_wait: Duration,
    orphan_grace: Duration,
    unknown_kinds: UnknownKindPolicy,
    registry: Option<Registry>,
    allow_queues_without_jobs: bool,
    data: AppData,
    check_data: bool,
    middleware: Vec<Arc<dyn RunMiddleware>>,
    clock: Arc<dyn Clock>,
    maintenance: bool,
    listen: bool,
    leader: LeaderConfig,
    scheduler: SchedulerConfig,
    rescuer: RescuerConfig,
    archiver: ArchiverConfig,
    settler: SettlerConfig,
    pruner: PrunerConfig,
    cron: CronConfig,
    schedules: Vec<Periodic>,
}

/// `host-pid-xxxxxx`: unique per process start, even where every container's host name
/// and process id are alike (PID 1 in a fixed-name container), by a random suffix.
fn default_node_name() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let pid = std::process::id();
    let suffix: u32 = rand::random::<u32>() & 0x00ff_ffff;
    format!("{host}-{pid}-{suffix:06x}")
}

impl WorkerBuilder {
    /// A builder on `driver` with every default: no queue yet, polling every second,
    /// heartbeats every second, 30 s to shut down, maintenance on, listening on.
    pub(crate) fn new(driver: Arc<dyn Driver>) -> WorkerBuilder {
        WorkerBuilder {
            driver,
            queues: Vec::new(),
            node: None,
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(1),
            shutdown_timeout: Duration::from_secs(30),
            max_fetch: 1_000,
            claims_in_flight: 1,
            fetch_cooldown: Duration::from_millis(2),
            prefetch_window: Duration::from_millis(20),
            prefetch_max_wait: Duration::from_secs(1),
            orphan_grace: Duration::from_secs(30),
            unknown_kinds: UnknownKindPolicy::default(),
            registry: None,
            allow_queues_without_jobs: false,
            data: AppData::new(),
            check_data: true,
            middleware: Vec::new(),
            clock: Arc::new(SystemClock),
            maintenance: true,
            listen: true,
            leader: LeaderConfig::default(),
            scheduler: SchedulerConfig::default(),
            rescuer: RescuerConfig::default(),
            archiver: ArchiverConfig::default(),
            settler: SettlerConfig::default(),
            pruner: PrunerConfig::default(),
            cron: CronConfig::default(),
            schedules: Vec::new(),
        }
    }

    /// Claims ahead: each queue keeps a local buffer of claimed jobs beyond its free
    /// slots, as many as its slots complete in `window` at the mean run time of its recent
    /// jobs on this node, up to its [`QueueConfig::prefetch`] cap. Default 20 ms; zero
    /// turns the buffer off. A queue that has run nothing yet buffers nothing.
    ///
    /// With a buffer, a slot that frees starts the next job at once instead of waiting
    /// for a claim's round trip, and claims come in batches near the cap even when the
    /// queue has few slots: a queue of 24 slots running fast jobs claims as a queue of 100
    /// would. A queue of slow jobs completes few in a window and buffers none. Buffered
    /// jobs are claimed in the database (state `running`, this node's), start in priority
    /// order whichever claim brought them, and start their timeout when they run. They go
    /// back on shutdown and on pause with their attempt given back, and after
    /// [`prefetch_max_wait`](Self::prefetch_max_wait).
    ///
    /// The bound this gives a job of higher priority than those buffered: at most the
    /// buffer plus one claim of lower-priority jobs start after it is enqueued and before
    /// it does, about one window's worth at the queue's rate, and never more than
    /// `prefetch_max_wait` of waiting.
    pub fn prefetch_window(mut self, window: Duration) -> Self {
        self.prefetch_window = window;
        self
    }

    /// How long a buffered job may wait for a slot before it goes back to the table for
    /// any node to claim (its attempt given back, its place kept). Default 1 s. Must be
    /// shorter than the rescuer's `timeout_grace`: a buffered job's row reads as claimed
    /// when it was buffered.
    pub fn prefetch_max_wait(mut self, wait: Duration) -> Self {
        self.prefetch_max_wait = wait;
        self
    }

    /// Runs `queue` with `concurrency` jobs at a time.
    pub fn queue(self, queue: impl Into<String>, concurrency: usize) -> Self {
        self.queue_config(QueueConfig::new(queue, concurrency))
    }

    /// Runs a queue with full settings (e.g. delete-on-completion).
    pub fn queue_config(mut self, config: QueueConfig) -> Self {
        self.queues.retain(|q| q.name != config.name);
        self.queues.push(config);
        self
    }

    /// Names this node (default: host name and pid). Must be unique among live nodes.
    pub fn node_name(mut self, name: impl Into<String>) -> Self {
        self.node = Some(name.into());
        self
    }

    /// How often an idle queue polls when no notification arrives (default 1 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// How often the node heartbeats and checks its liveness lock (default 1 s). Shorter
    /// than the rescuer's and the leader's `lock_lost_grace` (1.5 s), and several times
    /// shorter than `node_stale_after` (8 s).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// How long shutdown waits for running jobs before cancelling them and handing them
    /// back (default 30 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The most jobs claimed by one statement (default 1,000; 1 to 100,000).
    pub fn max_fetch(mut self, n: usize) -> Self {
        self.max_fetch = n;
        self
    }

    /// How many claim statements a queue may have in flight at once (default 1). With
    /// more, each asks for its share of the queue's slots, so one batch is on its way while
    /// the last still runs: worth it when the database is far away (a round trip long next
    /// to a claim's own time). On a nearby database concurrent claims of one queue contend
    /// for the same rows at its head and each is smaller; the benchmark measured 2 slower
    /// than 1 (docs/benchmarks.md).
    ///
    /// A driver without [`SkipLocked`](jobs_driver::Capability::SkipLocked) serialises
    /// claims, so the worker keeps one in flight whatever this says.
    pub fn claims_in_flight(mut self, n: usize) -> Self {
        self.claims_in_flight = n;
        self
    }

    /// How long a busy queue with fewer slots free than one claim's share waits for more
    /// to free before claiming what it has, so that claims stay large (default 2 ms). An
    /// idle queue claims at once.
    pub fn fetch_cooldown(mut self, cooldown: Duration) -> Self {
        self.fetch_cooldown = cooldown;
        self
    }

    /// How long a job may sit `running` under this node's name without this node holding
    /// it before the node hands it back as orphaned (default 30 s). That happens when the
    /// connection dies after a claim committed but before its reply arrived. The check
    /// runs with each heartbeat; the grace keeps it clear of claims still in flight.
    pub fn orphan_grace(mut self, grace: Duration) -> Self {
        self.orphan_grace = grace;
        self
    }

    /// What to do with a claimed job of a kind this worker does not know (default
    /// [`UnknownKindPolicy::HandBack`]: back to the queue for 5 s, for up to an hour).
    pub fn unknown_kinds(mut self, policy: UnknownKindPolicy) -> Self {
        self.unknown_kinds = policy;
        self
    }

    /// Serve queues that no registered job names as its queue (their jobs arrive by a
    /// per-call `.queue(..)`). Without it, `build()` refuses such a queue with
    /// [`Error::NoJobsForQueue`](crate::Error::NoJobsForQueue): a worker binary that does not
    /// link the crate defining the jobs would otherwise claim them and not know them.
    pub fn allow_queues_without_jobs(mut self) -> Self {
        self.allow_queues_without_jobs = true;
        self
    }

    /// The jobs this worker can run (default: every `#[job]` in the binary).
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The clock (tests inject a [`ManualClock`](crate::ManualClock)).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Whether to listen for notifications (default `true`). Off, queues rely on polling,
    /// and the heartbeat asks for cancellations. A driver without notifications always
    /// polls (behind PgBouncer in transaction mode, use `PgDriver::through_pooler`, which
    /// has none unless it listens on a direct connection).
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// Checks every setting and builds the worker. Fails with
    /// [`Error::InvalidOption`](crate::Error::InvalidOption) naming a zero or absurd setting (an interval, a batch, a
    /// lease no longer than its renewal, a staleness no longer than the heartbeat), and with
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule) naming an invalid cron schedule.
    pub fn build(self) -> Result<Worker> {
        self.check()?;
        let registry = match self.registry {
            Some(r) => r,
            None => Registry::from_inventory()?,
        };
        let served: Vec<&str> = self.queues.iter().map(|q| q.name.as_str()).collect();
        Self::check_queues_have_jobs(&registry, &served, self.allow_queues_without_jobs)?;
        if self.check_data {
            Self::check_jobs_have_their_data(&registry, &served, &self.data)?;
        }
        let mut schedules: Vec<Periodic> =
            registry.descriptors().filter_map(Periodic::from_descriptor).collect();
        schedules.sort_by(|a, b| a.name().cmp(b.name()));
        schedules.extend(self.schedules);
        let cron = CronEnqueuer::new(self.cron, &schedules)?;
        let node: Arc<str> = Arc::from(self.node.unwrap_or_else(default_node_name));
        let (sender, receiver) = completion_channel::channel(CompleterConfig::default());
        // Without SKIP LOCKED, claims of one queue wait for each other: keep one in flight.
        let claims_in_flight =
            if self.driver.capabilities().has(Capability::SkipLocked) { self.claims_in_flight } else { 1 };
        let declared: Vec<DeclaredLimits> =
            self.queues.iter().map(|q| Self::declared_limits(&registry, q)).collect::<Result<_>>()?;
        let queues = self
            .queues
            .into_iter()
            .zip(declared)
            .map(|(config, declared)| {
                let runtime = QueueRuntime {
                    name: Arc::from(config.name.as_str()),
                    label: Box::leak(config.name.clone().into_boxed_str()),
                    slots: Arc::new(Semaphore::new(config.concurrency)),
                    limit: Limit::new(config.concurrency),
                    wake: Notify::new(),
                    batch: AtomicUsize::new(shared::batch_size(
                        config.concurrency,
                        claims_in_flight,
                        self.max_fetch,
                    )),
                    freed: AtomicUsize::new(0),
                    slot_freed: Notify::new(),
                    buffer: Mutex::new(Default::default()),
                    prefetch: Prefetch { window: self.prefetch_window, cap: config.prefetch_cap() },
                    run_time: RunTime::default(),
                    low_water: AtomicUsize::new(0),
                    paused: AtomicBool::new(false),
                    limited: AtomicBool::new(declared.any()),
                    declared,
                    ended: Mutex::new(Default::default()),
                    fetches: AtomicU64::new(0),
                    config,
                };
                (runtime.config.name.clone(), Arc::new(runtime))
            })
            .collect::<HashMap<_, _>>();
        let shared = Arc::new(Shared {
            driver: self.driver,
            registry,
            data: self.data,
            middleware: self.middleware.into(),
            clock: self.clock,
            node,
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            config: RuntimeConfig {
                poll_interval: self.poll_interval,
                heartbeat_interval: self.heartbeat_interval,
                claims_in_flight,
                max_fetch: self.max_fetch,
                fetch_cooldown: self.fetch_cooldown,
                prefetch_max_wait: self.prefetch_max_wait,
                orphan_grace: self.orphan_grace,
                unknown_kinds: self.unknown_kinds,
                node_stale_after: self.rescuer.node_stale_after,
            },
            queues,
            running: Mutex::new(Default::default()),
            held: Mutex::new(Default::default()),
            tracker: TaskTracker::new(),
            completions: sender,
            listening: AtomicBool::new(false),
            lock_key: Mutex::new(None),
            owns_name: AtomicBool::new(true),
        });
        let maintenance = self.maintenance.then_some(Maintenance {
            leader: self.leader,
            scheduler: self.scheduler,
            rescuer: self.rescuer,
            archiver: self.archiver,
            settler: self.settler,
            pruner: self.pruner,
            cron,
        });
        Ok(Worker {
            shared,
            receiver,
            shutdown_timeout: self.shutdown_timeout,
            maintenance,
            listen: self.listen,
        })
    }
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("queues", &self.queues)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}
