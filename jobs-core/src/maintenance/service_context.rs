//! What every service runs with ([`ServiceContext`]), and the loop that runs a service
//! while its node leads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobs_driver::Driver;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::into_driver::IntoDriver;

/// What every service needs: the driver, the clock, this node's name, whether it leads,
/// and when its database calls last failed.
#[derive(Clone)]
pub struct ServiceContext {
    /// The driver.
    pub driver: Arc<dyn Driver>,
    /// The clock queries are given.
    pub clock: Arc<dyn Clock>,
    /// This node's name.
    pub node: Arc<str>,
    leader: Arc<watch::Sender<bool>>,
    /// Until when this node may act as leader: the start of its last successful renewal
    /// plus the lease's length. Past it, a renewal that hangs cannot keep it leading.
    lease_until: Arc<Mutex<Option<Instant>>>,
    last_failure: Arc<Mutex<Option<Instant>>>,
}

impl ServiceContext {
    /// A context on `driver` (or a pool a driver wraps) with the system clock, for node
    /// `node`, not (yet) leader.
    pub fn new(driver: impl IntoDriver, node: impl Into<Arc<str>>) -> ServiceContext {
        ServiceContext {
            driver: driver.into_driver(),
            clock: Arc::new(SystemClock),
            node: node.into(),
            leader: Arc::new(watch::Sender::new(false)),
            lease_until: Arc::new(Mutex::new(None)),
            last_failure: Arc::new(Mutex::new(None)),
        }
    }

    /// The same context with another clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> ServiceContext {
        self.clock = clock;
        self
    }

    /// Whether this node holds the leader lease: its last renewal succeeded, and the
    /// lease it renewed has not run out since that renewal started (by this process's own
    /// clock: a renewal that hangs does not keep a node leading past its lease, which
    /// another node may take meanwhile).
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
            && self
                .lease_until
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|until| Instant::now() < until)
    }

    /// Records whether this node leads, and until when its lease lets it (`None`: it does
    /// not).
    pub(crate) fn set_leader(&self, until: Option<Instant>) {
        let leader = until.is_some();
        *self.lease_until.lock().unwrap_or_else(|e| e.into_inner()) = until;
        self.leader.send_if_modified(|held| std::mem::replace(held, leader) != leader);
    }

    /// A receiver that sees each change of leadership.
    pub(crate) fn leadership(&self) -> watch::Receiver<bool> {
        self.leader.subscribe()
    }

    /// Records that a database call of this node failed (the elector, the heartbeat and
    /// the services call it).
    pub(crate) fn note_database_failure(&self) {
        *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// Whether this node's database calls have all succeeded for at least `period`: until
    /// then, other nodes' silence may be the database's, not theirs (a restart, say).
    pub(crate) fn database_healthy_for(&self, period: Duration) -> bool {
        match *self.last_failure.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(failed) => failed.elapsed() >= period,
            None => true,
        }
    }
}

/// Calls `pass` every `interval` while the node leads, and at once when it becomes leader
/// (a new leader rescues and schedules without waiting a tick), until `stop` fires. A
/// service whose config is invalid (a zero interval, say: built without
/// `WorkerBuilder::build`'s checks) logs why and does not run.
pub(crate) async fn leader_loop<F, Fut>(
    ctx: &ServiceContext,
    (service, config): (&'static str, crate::error::Result<()>),
    interval: Duration,
    stop: &CancellationToken,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if let Err(e) = config {
        tracing::error!(service, error = %e, "not running a service with an invalid configuration");
        return;
    }
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut leadership = ctx.leadership();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                if ctx.is_leader() {
                    pass().await;
                }
            }
            Ok(()) = leadership.changed() => {
                if *leadership.borrow_and_update() {
                    pass().await;
                    ticker.reset();
                }
            }
        }
    }
}

impl std::fmt::Debug for ServiceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceContext")
            .field("node", &self.node)
            .field("leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

/// Runs `batch` again while it comes back full (`full` rows: there may be more), at most
/// `max_batches` times; returns the rows of all batches. The pruner's and the archiver's
/// pass.
pub(crate) async fn while_full<F, Fut>(max_batches: u32, full: i64, mut batch: F) -> crate::error::Result<i64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::error::Result<i64>>,
{
    let mut total = 0;
    for _ in 0..max_batches {
        let n = batch().await?;
        total += n;
        if n < full {
            break;
        }
    }
    Ok(total)
}
