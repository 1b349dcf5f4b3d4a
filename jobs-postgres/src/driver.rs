//! [`PgDriver`], the Postgres driver, and how one is made: on a pool, through a pooler in
//! transaction mode, listening on a direct connection, without a capability. Its
//! operations are in `operations.rs`.

use jobs_driver::{Capabilities, Capability, DriverError, JobFilter, Result};

use crate::pool::Pool;

/// The Postgres driver: every [`Capability`], unless told to do without one ([`without`](Self::without)).
///
/// Cheap to clone (the pool is shared). `Worker::builder`, `DashboardConfig::new` and the
/// enqueue API accept a [`Pool`] directly and wrap it in one.
#[derive(Clone)]
pub struct PgDriver {
    pub(crate) pool: Pool,
    pub(crate) capabilities: Capabilities,
    /// Each operation in a transaction of its own (the pool goes through a pooler in
    /// transaction mode).
    pub(crate) through_pooler: bool,
    /// Where LISTEN connects when the pool cannot carry it: a direct URL.
    pub(crate) listen_url: Option<String>,
}

impl std::fmt::Debug for PgDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (status, mut d) = (self.pool.status(), f.debug_struct("PgDriver"));
        d.field("pool_size", &status.size).field("max_size", &status.max_size);
        d.field("capabilities", &self.capabilities).finish()
    }
}

impl PgDriver {
    /// The driver on `pool`. Size the pool for the worker's claims, its completer,
    /// heartbeat and listener, the dashboard, and the connections jobs take themselves.
    ///
    /// A pool made by [`pooler::pool`](crate::pooler::pool) makes a
    /// [`through_pooler`](Self::through_pooler) driver.
    pub fn new(pool: Pool) -> PgDriver {
        if crate::pooler::is_pooler_pool(&pool) {
            return PgDriver::through_pooler(pool);
        }
        PgDriver { pool, capabilities: Capabilities::ALL, through_pooler: false, listen_url: None }
    }

    /// The driver on a pool that reaches Postgres through a pooler in transaction mode
    /// (PgBouncer's `pool_mode = transaction`); make the pool with [`pooler::pool`](crate::pooler::pool).
    ///
    /// Every operation runs in a transaction of its own, so that no prepared statement or
    /// lock outlives the server connection the pooler lent it; leader election, heartbeats
    /// and cron keep their state in tables, never in a session. LISTEN cannot pass such a
    /// pooler: the driver lacks [`ListenNotify`](Capability::ListenNotify) and workers poll,
    /// unless [`listen_directly`](Self::listen_directly) gives them a direct connection.
    /// Nor can a session's advisory lock: the driver lacks
    /// [`LivenessLocks`](Capability::LivenessLocks) (a node is dead when its heartbeat is
    /// `node_stale_after` old) unless it has that direct connection too.
    /// Enqueues still notify (NOTIFY is part of the transaction, which a pooler passes).
    pub fn through_pooler(pool: Pool) -> PgDriver {
        PgDriver {
            pool,
            capabilities: Capabilities::ALL
                .without(Capability::ListenNotify)
                .without(Capability::LivenessLocks),
            through_pooler: true,
            listen_url: None,
        }
    }

    /// LISTEN on a connection of its own to `database_url` (the database itself, not the
    /// pooler), while every other operation goes through the pool: gives a
    /// [`through_pooler`](Self::through_pooler) driver [`ListenNotify`](Capability::ListenNotify)
    /// back, at one direct connection per worker process; and
    /// [`LivenessLocks`](Capability::LivenessLocks), whose lock each node holds on a second
    /// direct connection.
    pub fn listen_directly(mut self, database_url: impl Into<String>) -> PgDriver {
        self.listen_url = Some(database_url.into());
        self.capabilities = self.capabilities.with(Capability::ListenNotify).with(Capability::LivenessLocks);
        self
    }

    /// Whether every operation runs in a transaction of its own (see [`through_pooler`](Self::through_pooler)).
    pub fn is_through_pooler(&self) -> bool {
        self.through_pooler
    }

    /// The same driver declaring that it lacks `capability`, and doing without it:
    /// - [`ListenNotify`](Capability::ListenNotify): no listener; workers poll, and learn of
    ///   cancellations at their heartbeat (behind a pooler in transaction mode this is not
    ///   enough: use [`through_pooler`](Self::through_pooler));
    /// - [`CountEstimates`](Capability::CountEstimates): counts past their cap are
    ///   `Count::AtLeast`;
    /// - [`JsonContainment`](Capability::JsonContainment): no search of arguments and
    ///   metadata (the dashboard hides it);
    /// - [`Archive`](Capability::Archive): no archiver (a success still moves to the archive;
    ///   other finished jobs stay in `jobs`);
    /// - the others are declared lacking (one claim in flight per queue without `SkipLocked`).
    pub fn without(mut self, capability: Capability) -> PgDriver {
        self.capabilities = self.capabilities.without(capability);
        self
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A filter this driver can apply: a search needs JSON containment.
    pub(crate) fn can_filter(&self, filter: &JobFilter) -> Result<()> {
        if filter.search.is_some() && !self.capabilities.has(Capability::JsonContainment) {
            return Err(DriverError::Unsupported {
                driver: "postgres",
                operation: "search arguments and metadata (JSON containment is switched off)",
            });
        }
        Ok(())
    }
}
