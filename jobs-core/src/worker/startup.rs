//! A configured worker ([`Worker`], built by `WorkerBuilder::build`) and how it starts:
//! the first heartbeat, the pause flags, then the completer, heartbeat, listener,
//! producers and, unless disabled, the maintenance services.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jobs_driver::{Completion, NodeHold, NodeHoldParams, NodeLock, QueueSettingsParams, ServerStatusParams};
use tokio_util::sync::CancellationToken;

use super::completion_channel::CompleterConfig;
use super::handle::{ShutdownReport, WorkerHandle};
use super::shared::Shared;
use super::{completer, heartbeat, listener, liveness, panic_capture, producer};
use crate::error::Result;
use crate::maintenance::{
    Archiver, ArchiverConfig, CronEnqueuer, LeaderConfig, LeaderElector, Pruner, PrunerConfig, Rescuer,
    RescuerConfig, Scheduler, SchedulerConfig, ServiceContext, Settler, SettlerConfig,
};
use crate::retry_pause::RetryPause;

/// The maintenance services a worker runs while it leads.
pub(super) struct Maintenance {
    pub(super) leader: LeaderConfig,
    pub(super) scheduler: SchedulerConfig,
    pub(super) rescuer: RescuerConfig,
    pub(super) archiver: ArchiverConfig,
    pub(super) settler: SettlerConfig,
    pub(super) pruner: PrunerConfig,
    pub(super) cron: CronEnqueuer,
}

/// A configured worker, ready to [`start`](Worker::start).
pub struct Worker {
    pub(super) shared: Arc<Shared>,
    pub(super) receiver: tokio::sync::mpsc::Receiver<Completion>,
    pub(super) shutdown_timeout: Duration,
    pub(super) maintenance: Option<Maintenance>,
    pub(super) listen: bool,
}

/// How long a starting worker retries a database that is unreachable or busy (SQLite's
/// write lock held by another process) before `start` fails with its error.
pub(crate) const START_RETRY_FOR: Duration = Duration::from_secs(30);

/// Refuses a server workers cannot run on (a read-only replica, a Postgres older than the
/// oldest supported), with the reason; logs what the server is.
async fn check_server(shared: &Shared) -> Result<()> {
    let status = shared.driver.server_status(ServerStatusParams {}).await?;
    if let Some(why) = status.unfit_for_workers(shared.driver.name()) {
        return Err(crate::error::Error::UnfitServer(why));
    }
    tracing::info!(node = %shared.node, server = %status.version, "the worker's database");
    Ok(())
}

/// How long a starting node waits for its name's liveness lock (a process that has just
/// died under the same name may not have let go of it yet).
const NAME_WAIT: Duration = Duration::from_secs(5);

/// Who holds the node's name, as its row says: host, process id, last heartbeat.
async fn holder_of(shared: &Shared) -> Option<jobs_driver::NodeRow> {
    let nodes = shared.driver.node_list(jobs_driver::NodeListParams {}).await.ok()?;
    nodes.into_iter().find(|n| n.name == *shared.node)
}

fn describe(holder: Option<&jobs_driver::NodeRow>) -> String {
    match holder {
        Some(n) => format!("host {}, process {}, last heartbeat {}", n.host, n.pid, n.heartbeat_at),
        None => "a process whose node row is gone".to_owned(),
    }
}

/// Takes the node's liveness lock, keyed by its name: a live process with the same name
/// holds it, and this node refuses to start ([`Error::NodeNameTaken`]). Where the driver
/// holds no lock, a heartbeat under the name from another process younger than
/// `node_stale_after` stands for a live holder: the node waits for it to go stale, and
/// refuses if it does not.
///
/// [`Error::NodeNameTaken`]: crate::Error::NodeNameTaken
async fn hold_name(shared: &Shared) -> Result<Option<Box<dyn NodeLock>>> {
    let deadline = tokio::time::Instant::now() + NAME_WAIT;
    loop {
        match shared.driver.node_hold(NodeHoldParams { node: &shared.node }).await? {
            NodeHold::Held(lock) => {
                *shared.lock_key.lock().unwrap_or_else(|e| e.into_inner()) = Some(lock.key().to_owned());
                return Ok(Some(lock));
            }
            NodeHold::Taken if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            NodeHold::Taken => {
                let holder = holder_of(shared).await;
                return Err(crate::error::Error::NodeNameTaken {
                    node: shared.node.to_string(),
                    holder: describe(holder.as_ref()),
                });
            }
            NodeHold::Unsupported(why) => {
                tracing::debug!(node = %shared.node, why, "no liveness lock: the node's heartbeats alone tell it lives");
                let deadline = tokio::time::Instant::now() + shared.config.node_stale_after;
                loop {
                    let holder = holder_of(shared).await;
                    let live_elsewhere = holder.as_ref().is_some_and(|n| {
                        (n.host.as_str(), n.pid) != (shared.host.as_str(), shared.pid)
                            && shared.clock.now() - n.heartbeat_at
                                < chrono::TimeDelta::from_std(shared.config.node_stale_after)
                                    .unwrap_or(chrono::TimeDelta::MAX)
                    });
                    if !live_elsewhere {
                        return Ok(None);
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(crate::error::Error::NodeNameTaken {
                            node: shared.node.to_string(),
                            holder: describe(holder.as_ref()),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
}

/// Registers the node before it claims anything (so the rescuer never mistakes its jobs
/// for orphans) and reads the queues' stored settings: pause flags (so a paused queue is
/// not fetched even once), limits, and the concurrency set for the cluster (so neither is
/// exceeded, even at start).
/// A transient error is retried for [`START_RETRY_FOR`]. Returns the node's liveness lock,
/// if the driver holds one (see [`hold_name`]).
async fn register(shared: &Shared) -> Result<Option<Box<dyn NodeLock>>> {
    let deadline = tokio::time::Instant::now() + START_RETRY_FOR;
    let mut pause = RetryPause::new(Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let registered = async {
            check_server(shared).await?;
            let lock = hold_name(shared).await?;
            heartbeat::beat(shared, true).await?;
            let stored = shared.driver.queue_settings(QueueSettingsParams { queue: None }).await?;
            Ok::<_, crate::error::Error>((lock, stored))
        }
        .await;
        match registered {
            Ok((lock, stored)) => {
                for settings in stored {
                    if let Some(q) = shared.queues.get(&settings.queue) {
                        q.apply_settings(Some(&settings), &shared.config);
                    }
                }
                return Ok(lock);
            }
            Err(e) if e.is_connection_error() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "registering the node failed; retrying");
                tokio::time::sleep(pause.failed()).await;
            }
            Err(e) => return Err(e),
        }
    }
}

impl Worker {
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
        let lock = register(&shared).await?;
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
        let service_ctx =
            ServiceContext::new(shared.driver.clone(), shared.node.clone()).with_clock(shared.clock.clone());
        let mut services =
            vec![tokio::spawn(heartbeat::run(shared.clone(), service_ctx.clone(), stop_services.clone()))];
        if let Some(lock) = lock {
            services.push(tokio::spawn(liveness::run(shared.clone(), lock, stop_services.clone())));
        }
        if self.listen {
            services.push(tokio::spawn(listener::run(shared.clone(), stop_services.clone())));
        }
        let mut producers = Vec::new();
        for queue in shared.queues.values() {
            producers.push(tokio::spawn(producer::run(shared.clone(), queue.clone(), stop_fetch.clone())));
        }
        if let Some(Maintenance { leader, scheduler, rescuer, archiver, settler, pruner, cron }) =
            self.maintenance
        {
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
            services
                .push(tokio::spawn(Archiver::new(archiver).run(service_ctx.clone(), stop_services.clone())));
            services.push(tokio::spawn(Pruner::new(pruner).run(service_ctx.clone(), stop_services.clone())));
            services
                .push(tokio::spawn(Settler::new(settler).run(service_ctx.clone(), stop_services.clone())));
            if !cron.is_empty() {
                services.push(tokio::spawn(cron.run(service_ctx.clone(), stop_services.clone())));
            }
        }
        let by_queue = shared.registry.kinds_by_queue();
        for queue in shared.queues.keys() {
            let kinds = by_queue.get(queue).map(|k| k.join(", ")).unwrap_or_default();
            tracing::info!(node = %shared.node, queue = %queue, kinds = %kinds, "serving queue (and any registered kind enqueued to it)");
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

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("node", &self.shared.node).finish_non_exhaustive()
    }
}
