//! What every service runs with ([`ServiceContext`]), and the loop that runs a service
//! while its node leads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jobs_driver::Driver;
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, SystemClock};
use crate::into_driver::IntoDriver;

/// What every service needs: the driver, the clock, this node's name, and whether it leads.
#[derive(Clone)]
pub struct ServiceContext {
    /// The driver.
    pub driver: Arc<dyn Driver>,
    /// The clock queries are given.
    pub clock: Arc<dyn Clock>,
    /// This node's name.
    pub node: Arc<str>,
    leader: Arc<AtomicBool>,
}

impl ServiceContext {
    /// A context on `driver` (or a pool a driver wraps) with the system clock, for node
    /// `node`, not (yet) leader.
    pub fn new(driver: impl IntoDriver, node: impl Into<Arc<str>>) -> ServiceContext {
        ServiceContext {
            driver: driver.into_driver(),
            clock: Arc::new(SystemClock),
            node: node.into(),
            leader: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The same context with another clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> ServiceContext {
        self.clock = clock;
        self
    }

    /// Whether this node holds the leader lease.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::Release);
    }
}

/// Calls `pass` every `interval` while the node leads, until `stop` fires. A service whose
/// config is invalid (a zero interval, say: built without `WorkerBuilder::build`'s checks)
/// logs why and does not run.
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
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                if ctx.is_leader() {
                    pass().await;
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
