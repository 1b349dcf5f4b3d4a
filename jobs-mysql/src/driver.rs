//! [`MysqlDriver`]: the [`Driver`] on a MariaDB or MySQL pool. Each operation takes a
//! connection from the pool and runs the statements of the module that owns them; those
//! of several statements run in a transaction, and deliver their notifications in this
//! process once it commits.

use std::sync::Arc;
use std::time::Duration;

use jobs_driver::wake_ration::WakeRation;
use jobs_driver::{Capabilities, Capability, Notification, Result};

use crate::local::{self, Hub};
use crate::pool::{self, Lent, Pool};

/// What MariaDB and MySQL can do: notifications (through `job_notifications`, read every
/// [`notification_poll`](MysqlDriver::notification_poll)), `FOR UPDATE SKIP LOCKED`,
/// JSON containment search (`JSON_CONTAINS`, checked again in Rust), and liveness locks
/// (`GET_LOCK` on a connection of each node's own), and reads that run in parallel on the
/// server. They have no
/// `UPDATE … RETURNING` (the driver stamps rows with a token and reads them back) and no
/// planner estimates the driver uses.
pub const CAPABILITIES: Capabilities = Capabilities::NONE
    .with(Capability::ListenNotify)
    .with(Capability::SkipLocked)
    .with(Capability::JsonContainment)
    .with(Capability::LivenessLocks)
    .with(Capability::ParallelReads);

/// The default window: the longest a wake-up row is held back after the insert that needs
/// it, and the shortest time between two of one queue from one driver. Change it with
/// [`MysqlDriver::wake_window`].
pub const WAKE_WINDOW: Duration = Duration::from_millis(5);

/// The default of [`MysqlDriver::notification_poll`].
pub const DEFAULT_NOTIFICATION_POLL: Duration = Duration::from_millis(50);

/// The MariaDB / MySQL driver. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct MysqlDriver {
    pub(crate) pool: Pool,
    pub(crate) hub: Arc<Hub>,
    pub(crate) notification_poll: Duration,
    /// Rationing of the wake-up rows of enqueues through this driver (`wakeups`).
    pub(crate) wakeups: Arc<WakeRation>,
}

impl std::fmt::Debug for MysqlDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("MysqlDriver")
            .field("pool_size", &status.size)
            .field("max_size", &status.max_size)
            .field("notification_poll", &self.notification_poll)
            .finish()
    }
}

impl MysqlDriver {
    /// The driver on the database `url` names (`mysql://user:password@host:port/database`),
    /// with a pool of at most `max_connections`. Drivers on one URL in one process share
    /// their notifications at once.
    pub fn open(url: &str, max_connections: usize) -> Result<MysqlDriver> {
        Ok(MysqlDriver {
            pool: pool::pool(url, max_connections)?,
            hub: local::for_url(url),
            notification_poll: DEFAULT_NOTIFICATION_POLL,
            wakeups: Arc::new(WakeRation::new(WAKE_WINDOW)),
        })
    }

    /// The driver on `pool` (made with [`pool`](crate::pool()): each connection needs the
    /// driver's session settings).
    pub fn new(pool: Pool) -> MysqlDriver {
        MysqlDriver {
            pool,
            hub: Arc::new(tokio::sync::broadcast::channel(1024).0),
            notification_poll: DEFAULT_NOTIFICATION_POLL,
            wakeups: Arc::new(WakeRation::new(WAKE_WINDOW)),
        }
    }

    /// How often listeners read `job_notifications` for other processes' notifications
    /// (this process's own arrive at once). Clamped to 1 ms – 10 s.
    pub fn notification_poll(mut self, every: Duration) -> MysqlDriver {
        self.notification_poll = every.clamp(Duration::from_millis(1), Duration::from_secs(10));
        self
    }

    /// The wake-up window of enqueues through this driver (default [`WAKE_WINDOW`], 5 ms):
    /// within it of a queue's last wake-up, an enqueue writes no `job_notifications` row of
    /// its own and other processes are told by one row at the window's end. Zero makes
    /// every enqueue write its row, in a transaction with its jobs.
    pub fn wake_window(self, window: Duration) -> MysqlDriver {
        self.wakeups.set_window(window);
        self
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub(crate) async fn conn(&self) -> Result<Lent> {
        pool::lend(&self.pool).await
    }

    /// Delivers committed notifications to this process's listeners.
    pub(crate) fn deliver(&self, told: &[Notification]) {
        local::publish(&self.hub, told);
    }
}
