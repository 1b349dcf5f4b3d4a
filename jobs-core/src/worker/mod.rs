//! The worker: claims jobs from its queues, runs them, writes their outcomes back, and
//! (on the leader) runs the maintenance services.
//!
//! ```text
//!  listener ──wake──▶ producer (one per queue) ──claim (SKIP LOCKED)──▶ executor task per job
//!                                                                        │ outcome
//!  heartbeat ─▶ job_nodes           completer ◀──────────channel──────────┘
//!                                     └─ one fenced UPDATE per batch
//!  leader elector ─▶ scheduler, rescuer, pruner (leader only)
//! ```

mod completer;
mod config;
mod drain;
mod executor;
mod heartbeat;
mod listener;
mod panic_capture;
mod producer;
mod runtime;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::{QueueConfig, UnknownKindPolicy};
pub use drain::Drained;

use self::completer::CompleterConfig;
use self::executor::StopReason;
use self::runtime::{QueueRuntime, RuntimeConfig, Shared};
use crate::clock::{Clock, SystemClock};
use crate::cron::Periodic;
use crate::db::{self, Pool};
use crate::enqueue::validate_queue;
use crate::error::{Error, Result};
use crate::maintenance::{
    CronConfig, CronEnqueuer, LeaderConfig, LeaderElector, Pruner, PrunerConfig, Rescuer, RescuerConfig,
    Scheduler, SchedulerConfig, ServiceContext,
};
use crate::registry::Registry;

/// Builds a [`Worker`]: `Worker::builder(pool).queue("default", 20).build()?`.
#[must_use = "a builder does nothing until built and started"]
pub struct WorkerBuilder {
    pool: Pool,
    queues: Vec<QueueConfig>,
    node: Option<String>,
    poll_interval: Duration,
    heartbeat_interval: Duration,
    shutdown_timeout: Duration,
    max_fetch: usize,
    claims_in_flight: usize,
    fetch_cooldown: Duration,
    orphan_grace: Duration,
    unknown_kinds: UnknownKindPolicy,
    registry: Option<Registry>,
    clock: Arc<dyn Clock>,
    maintenance: bool,
    listen: bool,
    leader: LeaderConfig,
    scheduler: SchedulerConfig,
    rescuer: RescuerConfig,
    pruner: PrunerConfig,
    cron: CronConfig,
    schedules: Vec<Periodic>,
}

fn default_node_name() -> String {
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let pid = std::process::id();
    match STARTED.fetch_add(1, Ordering::Relaxed) {
        0 => format!("{host}-{pid}"),
        n => format!("{host}-{pid}-{n}"),
    }
}

impl WorkerBuilder {
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

    /// How often the node heartbeats (default 2 s). The rescuer's `node_stale_after`
    /// should be several intervals.
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

    /// The most jobs claimed by one statement (default 1,000).
    pub fn max_fetch(mut self, n: usize) -> Self {
        self.max_fetch = n.max(1);
        self
    }

    /// How many claim statements a queue may have in flight at once (default 1). With
    /// more, each asks for its share of the queue's slots, so one batch is on its way while
    /// the last still runs: worth it when the database is far away (a round trip long next
    /// to a claim's own time). On a nearby database concurrent claims of one queue contend
    /// for the same rows at its head and each is smaller; the benchmark measured 2 slower
    /// than 1 (docs/benchmarks.md).
    pub fn claims_in_flight(mut self, n: usize) -> Self {
        self.claims_in_flight = n.max(1);
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
    /// [`UnknownKindPolicy::Fail`]).
    pub fn unknown_kinds(mut self, policy: UnknownKindPolicy) -> Self {
        self.unknown_kinds = policy;
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

    /// Does not take part in leader election, so never runs the maintenance services.
    pub fn without_maintenance(mut self) -> Self {
        self.maintenance = false;
        self
    }

    /// Whether to LISTEN for wake-ups (default `true`). Turn it off behind a pooler in
    /// transaction mode, where LISTEN does not work; queues then rely on polling.
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// Leader election settings.
    pub fn leader(mut self, config: LeaderConfig) -> Self {
        self.leader = config;
        self
    }

    /// Scheduler settings.
    pub fn scheduler(mut self, config: SchedulerConfig) -> Self {
        self.scheduler = config;
        self
    }

    /// Rescuer settings.
    pub fn rescuer(mut self, config: RescuerConfig) -> Self {
        self.rescuer = config;
        self
    }

    /// Pruner settings.
    pub fn pruner(mut self, config: PrunerConfig) -> Self {
        self.pruner = config;
        self
    }

    /// Cron enqueuer settings.
    pub fn cron(mut self, config: CronConfig) -> Self {
        self.cron = config;
        self
    }

    /// Adds a periodic job (besides those declared with `#[job(cron = ...)]`).
    pub fn schedule(mut self, schedule: Periodic) -> Self {
        self.schedules.push(schedule);
        self
    }

    /// Checks the configuration and builds the worker. Fails on an invalid cron
    /// schedule, naming it.
    pub fn build(self) -> Result<Worker> {
        if self.queues.is_empty() {
            return Err(Error::InvalidOption {
                option: "queues",
                reason: "a worker needs at least one queue".into(),
            });
        }
        for q in &self.queues {
            validate_queue(&q.name)?;
            if q.concurrency == 0 || q.concurrency > Semaphore::MAX_PERMITS {
                return Err(Error::InvalidOption {
                    option: "concurrency",
                    reason: format!("queue `{}`: concurrency must be at least 1", q.name),
                });
            }
        }
        for (option, d) in [
            ("poll_interval", self.poll_interval),
            ("heartbeat_interval", self.heartbeat_interval),
            ("leader.interval", self.leader.interval),
        ] {
            if d.is_zero() {
                return Err(Error::InvalidOption { option, reason: "must be longer than zero".into() });
            }
        }
        let registry = match self.registry {
            Some(r) => r,
            None => Registry::from_inventory()?,
        };
        let mut schedules: Vec<Periodic> =
            registry.descriptors().filter_map(Periodic::from_descriptor).collect();
        schedules.sort_by(|a, b| a.name().cmp(b.name()));
        schedules.extend(self.schedules);
        let cron = CronEnqueuer::new(self.cron, &schedules)?;
        let node: Arc<str> = Arc::from(self.node.unwrap_or_else(default_node_name));
        let (sender, receiver) = completer::channel(CompleterConfig::default());
        let queues = self
            .queues
            .into_iter()
            .map(|config| {
                let runtime = QueueRuntime {
                    name: Arc::from(config.name.as_str()),
                    label: Box::leak(config.name.clone().into_boxed_str()),
                    slots: Arc::new(Semaphore::new(config.concurrency)),
                    wake: Notify::new(),
                    batch: producer::batch_size(config.concurrency, self.claims_in_flight, self.max_fetch),
                    freed: std::sync::atomic::AtomicUsize::new(0),
                    slot_freed: Notify::new(),
                    paused: AtomicBool::new(false),
                    fetches: std::sync::atomic::AtomicU64::new(0),
                    config,
                };
                (runtime.config.name.clone(), Arc::new(runtime))
            })
            .collect::<HashMap<_, _>>();
        let shared = Arc::new(Shared {
            pool: self.pool,
            registry,
            clock: self.clock,
            node,
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            config: RuntimeConfig {
                poll_interval: self.poll_interval,
                heartbeat_interval: self.heartbeat_interval,
                claims_in_flight: self.claims_in_flight,
                fetch_cooldown: self.fetch_cooldown,
                orphan_grace: self.orphan_grace,
                unknown_kinds: self.unknown_kinds,
            },
            queues,
            running: Mutex::new(Default::default()),
            held: Mutex::new(Default::default()),
            tracker: TaskTracker::new(),
            completions: sender,
            listening: AtomicBool::new(false),
        });
        Ok(Worker {
            shared,
            receiver,
            shutdown_timeout: self.shutdown_timeout,
            maintenance: self.maintenance.then_some((
                self.leader,
                self.scheduler,
                self.rescuer,
                self.pruner,
                cron,
            )),
            listen: self.listen,
        })
    }
}

/// A configured worker, ready to [`start`](Worker::start).
pub struct Worker {
    shared: Arc<Shared>,
    receiver: tokio::sync::mpsc::Receiver<crate::db::execution::Completion>,
    shutdown_timeout: Duration,
    maintenance: Option<(LeaderConfig, SchedulerConfig, RescuerConfig, PrunerConfig, CronEnqueuer)>,
    listen: bool,
}

/// What a graceful shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Jobs still running at the deadline, cancelled and handed back to the queue without
    /// using up their attempt.
    pub handed_back: usize,
}

impl Worker {
    /// Starts configuring a worker on `pool`. Size the pool for the queues' fetches, the
    /// completer, the heartbeat, the listener, and the connections jobs take themselves.
    pub fn builder(pool: Pool) -> WorkerBuilder {
        WorkerBuilder {
            pool,
            queues: Vec::new(),
            node: None,
            poll_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(2),
            shutdown_timeout: Duration::from_secs(30),
            max_fetch: 1_000,
            claims_in_flight: 1,
            fetch_cooldown: Duration::from_millis(2),
            orphan_grace: Duration::from_secs(30),
            unknown_kinds: UnknownKindPolicy::Fail,
            registry: None,
            clock: Arc::new(SystemClock),
            maintenance: true,
            listen: true,
            leader: LeaderConfig::default(),
            scheduler: SchedulerConfig::default(),
            rescuer: RescuerConfig::default(),
            pruner: PrunerConfig::default(),
            cron: CronConfig::default(),
            schedules: Vec::new(),
        }
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.shared.node
    }

    /// Registers the node (first heartbeat), then starts the listener, the producers, the
    /// completer, the heartbeat and, unless disabled, the maintenance services. Returns
    /// once the node is registered; jobs run in background tasks.
    pub async fn start(self) -> Result<WorkerHandle> {
        panic_capture::install_hook();
        let shared = self.shared;
        // Register before claiming anything, so the rescuer never mistakes our jobs for
        // orphans; read pause flags so a paused queue is not fetched even once.
        heartbeat::beat(&shared).await?;
        {
            let mut conn = shared.pool.get().await?;
            let paused = db::queues::paused_queues(&mut conn).await?;
            for name in paused {
                if let Some(q) = shared.queues.get(&name) {
                    q.paused.store(true, Ordering::Release);
                }
            }
        }
        let stop_fetch = CancellationToken::new();
        let stop_completer = CancellationToken::new();
        let give_up = CancellationToken::new();
        let stop_services = CancellationToken::new();
        let completer = tokio::spawn(completer::run(
            shared.clone(),
            self.receiver,
            CompleterConfig::default(),
            stop_completer.clone(),
            give_up.clone(),
        ));
        let mut services = vec![tokio::spawn(heartbeat::run(shared.clone(), stop_services.clone()))];
        if self.listen {
            services.push(tokio::spawn(listener::run(shared.clone(), stop_services.clone())));
        }
        let mut producers = Vec::new();
        for queue in shared.queues.values() {
            producers.push(tokio::spawn(producer::run(shared.clone(), queue.clone(), stop_fetch.clone())));
        }
        let service_ctx =
            ServiceContext::new(shared.pool.clone(), shared.node.clone()).with_clock(shared.clock.clone());
        if let Some((leader, scheduler, rescuer, pruner, cron)) = self.maintenance {
            let elector = LeaderElector::new(leader);
            // Try once now so a single node starts its services without waiting a tick.
            if let Err(e) = elector.run_once(&service_ctx).await {
                tracing::warn!(error = %e, "leader election failed");
            }
            services.push(tokio::spawn(elector.run(service_ctx.clone(), stop_services.clone())));
            services.push(tokio::spawn(
                Scheduler::new(scheduler).run(service_ctx.clone(), stop_services.clone()),
            ));
            services
                .push(tokio::spawn(Rescuer::new(rescuer).run(service_ctx.clone(), stop_services.clone())));
            services.push(tokio::spawn(Pruner::new(pruner).run(service_ctx.clone(), stop_services.clone())));
            if !cron.is_empty() {
                services.push(tokio::spawn(cron.run(service_ctx.clone(), stop_services.clone())));
            }
        }
        tracing::info!(node = %shared.node, queues = ?shared.queues.keys().collect::<Vec<_>>(), "worker started");
        Ok(WorkerHandle {
            shared,
            stop_fetch,
            stop_completer,
            give_up,
            stop_services,
            completer,
            producers,
            services,
            shutdown_timeout: self.shutdown_timeout,
            service_ctx,
        })
    }

    /// Starts, runs until `signal` completes (e.g. `tokio::signal::ctrl_c()`), then shuts
    /// down gracefully.
    pub async fn run_until<F: Future>(self, signal: F) -> Result<ShutdownReport> {
        let handle = self.start().await?;
        signal.await;
        handle.shutdown().await
    }
}

/// A running worker. Call [`shutdown`](WorkerHandle::shutdown) to stop it cleanly.
pub struct WorkerHandle {
    shared: Arc<Shared>,
    stop_fetch: CancellationToken,
    stop_completer: CancellationToken,
    give_up: CancellationToken,
    stop_services: CancellationToken,
    completer: JoinHandle<()>,
    producers: Vec<JoinHandle<()>>,
    services: Vec<JoinHandle<()>>,
    shutdown_timeout: Duration,
    service_ctx: ServiceContext,
}

impl WorkerHandle {
    /// The node's name.
    pub fn node(&self) -> &str {
        &self.shared.node
    }

    /// Whether this node currently holds the leader lease.
    pub fn is_leader(&self) -> bool {
        self.service_ctx.is_leader()
    }

    /// Whether the LISTEN connection is up (wake-ups arrive without polling).
    pub fn is_listening(&self) -> bool {
        self.shared.listening.load(Ordering::Acquire)
    }

    /// How many jobs are running on this node now.
    pub fn running(&self) -> usize {
        self.shared.running.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// How many claim statements this node has issued for `queue` (0 for a queue it
    /// does not run).
    pub fn fetch_count(&self, queue: &str) -> u64 {
        self.shared.queues.get(queue).map_or(0, |q| q.fetches.load(Ordering::Relaxed))
    }

    /// The context the node's maintenance services run with.
    pub fn service_context(&self) -> &ServiceContext {
        &self.service_ctx
    }

    /// Stops gracefully: stops fetching; lets running jobs finish until the shutdown
    /// timeout; then cancels the rest and hands them back as retryable without using up
    /// their attempt; writes every outcome; releases the leader lease and unregisters the
    /// node. Nothing is left `running`.
    pub async fn shutdown(self) -> Result<ShutdownReport> {
        tracing::info!(node = %self.shared.node, "worker shutting down");
        self.stop_fetch.cancel();
        for producer in self.producers {
            let _ = producer.await;
        }
        self.shared.tracker.close();
        let mut handed_back = 0;
        if tokio::time::timeout(self.shutdown_timeout, self.shared.tracker.wait()).await.is_err() {
            let running: Vec<_> =
                self.shared.running.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
            handed_back = running.len();
            tracing::warn!(jobs = handed_back, "shutdown deadline passed; handing running jobs back");
            for job in running {
                job.stop(StopReason::Shutdown);
            }
            self.shared.tracker.wait().await;
        }
        self.stop_completer.cancel();
        // Give the final writes a bounded time if the database is unreachable.
        let give_up = self.give_up.clone();
        let deadline = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            give_up.cancel();
        });
        let _ = self.completer.await;
        deadline.abort();
        self.stop_services.cancel();
        for service in self.services {
            let _ = service.await;
        }
        let mut conn = self.shared.pool.get().await?;
        db::nodes::remove(&mut conn, &self.shared.node).await?;
        tracing::info!(node = %self.shared.node, handed_back, "worker stopped");
        Ok(ShutdownReport { handed_back })
    }

    /// Stops every task at once without writing anything back, as if the process had
    /// died: running jobs stay `running` for the rescuer. For tests of crash recovery.
    pub fn kill(self) {
        self.completer.abort();
        for task in self.producers.iter().chain(&self.services) {
            task.abort();
        }
        let running: Vec<_> =
            self.shared.running.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for job in running {
            job.stop(StopReason::Shutdown);
        }
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

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("node", &self.shared.node).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle").field("node", &self.shared.node).finish_non_exhaustive()
    }
}
