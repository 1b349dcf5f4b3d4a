//! The worker: claims jobs from its queues, runs them, writes their outcomes back, and
//! (on the leader) runs the maintenance services.
//!
//! ```text
//!  listener ──wake──▶ producer (one per queue) ──job_claim──▶ executor task per job
//!                                                                        │ outcome
//!  heartbeat ─▶ node_heartbeat      completer ◀──────────channel──────────┘
//!                                     └─ job_complete_many per batch (fenced)
//!  leader elector ─▶ scheduler, rescuer, pruner, cron (leader only)
//! ```
//!
//! Files: `builder` (settings, checked by `build()`), `handle` (a running worker and its
//! shutdown), `config` (queues), `runtime` (the state the tasks share), `producer`,
//! `executor`, `running` (a running job's handle), `completions` (the channel),
//! `completer`, `listener`, `heartbeat`, `drain` (running due jobs inline),
//! `panic_capture`.

mod builder;
mod completer;
mod completions;
mod config;
mod drain;
mod executor;
mod handle;
mod heartbeat;
mod listener;
mod panic_capture;
mod producer;
mod running;
mod runtime;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jobs_driver::{Completion, QueueListPausedParams};
use tokio_util::sync::CancellationToken;

pub use builder::WorkerBuilder;
pub use config::{QueueConfig, UnknownKindPolicy};
pub use drain::Drained;
pub use handle::{ShutdownReport, WorkerHandle};

use self::completions::CompleterConfig;
use self::runtime::Shared;
use crate::error::Result;
use crate::into_driver::IntoDriver;
use crate::maintenance::{
    CronEnqueuer, LeaderConfig, LeaderElector, Pruner, PrunerConfig, Rescuer, RescuerConfig, Scheduler,
    SchedulerConfig, ServiceContext,
};

/// The maintenance services a worker runs while it leads.
struct Maintenance {
    leader: LeaderConfig,
    scheduler: SchedulerConfig,
    rescuer: RescuerConfig,
    pruner: PrunerConfig,
    cron: CronEnqueuer,
}

/// A configured worker, ready to [`start`](Worker::start).
pub struct Worker {
    shared: Arc<Shared>,
    receiver: tokio::sync::mpsc::Receiver<Completion>,
    shutdown_timeout: Duration,
    maintenance: Option<Maintenance>,
    listen: bool,
}

impl Worker {
    /// Starts configuring a worker on `driver`: a [`Driver`](jobs_driver::Driver), or a
    /// pool a driver wraps (today's `Worker::builder(pool)`). Size the pool for the
    /// queues' claims, the completer, the heartbeat, the listener, and the connections
    /// jobs take themselves.
    pub fn builder(driver: impl IntoDriver) -> WorkerBuilder {
        WorkerBuilder::new(driver.into_driver())
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
        for name in shared.driver.queue_list_paused(QueueListPausedParams {}).await? {
            if let Some(q) = shared.queues.get(&name) {
                q.paused.store(true, Ordering::Release);
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
            ServiceContext::new(shared.driver.clone(), shared.node.clone()).with_clock(shared.clock.clone());
        if let Some(Maintenance { leader, scheduler, rescuer, pruner, cron }) = self.maintenance {
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

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("node", &self.shared.node).finish_non_exhaustive()
    }
}
