//! What a backend gives the suite: [`Backend`], a fresh database per case as a [`TestDb`]
//! (its driver, another node's, the application's connections), and the helpers cases
//! read it with.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jobs_core::driver::{
    Capabilities, Count, Driver, JobCountParams, JobFilter, JobGetParams, JobListParams, JobRow, JobState,
};
use jobs_core::testing::wait_for;
use jobs_core::{Worker, WorkerBuilder};

use crate::app_transaction::{self, AppTransaction, SyncAppTransaction};
use crate::jobs;

/// How long a case waits for a condition before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A database the suite runs on.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// What the backend's driver declares.
    const CAPABILITIES: Capabilities;

    /// How many steps the model-based test (`the_model_holds`, [`model`](crate::model))
    /// takes on this backend when `JOBS_MODEL_STEPS` is not set: 10,000 (about a minute on
    /// two cores). A variant of a backend whose full run is elsewhere (the same server
    /// through a pooler, or with fewer capabilities) may take fewer.
    const MODEL_STEPS: u64 = 10_000;

    /// A fresh, migrated database of the case's own, reached through a driver whose pool
    /// has `connections` connections.
    async fn database(connections: usize) -> TestDb;
}

/// One case's database: its driver, the ways to open more connections to it, and
/// whatever keeps it alive.
///
/// ```
/// use std::sync::Arc;
///
/// use jobs_conformance::TestDb;
/// use jobs_conformance::app_transaction::{Begin, BeginSync};
/// use jobs_core::driver::Driver;
///
/// /// A backend's start-up hands the suite its database this way.
/// fn case_database(
///     open: impl Fn(usize) -> Arc<dyn Driver> + Send + Sync + 'static,
///     (begin, begin_sync): (Begin, BeginSync),
///     database: impl Send + Sync + 'static,
/// ) -> TestDb {
///     TestDb::new(open(10), open, begin, begin_sync).keep_alive(database)
/// }
/// ```
pub struct TestDb {
    // Fields drop in this order: the driver (its pool) before the guards, so a database
    // is never removed under open connections.
    pub(crate) driver: Arc<dyn Driver>,
    _guards: Vec<Box<dyn Any + Send + Sync>>,
    pub(crate) another: Box<dyn Fn(usize) -> Arc<dyn Driver> + Send + Sync>,
    begin: app_transaction::Begin,
    begin_sync: app_transaction::BeginSync,
}

impl TestDb {
    /// A case's database reached through `driver`:
    /// - `another(n)` opens another driver with a pool of `n` on the same database (another
    ///   node's);
    /// - `begin` opens a connection of the application's own (the backend's async connection
    ///   type, not the driver's) and begins a transaction on it, `begin_sync` the same on a
    ///   synchronous connection (`enqueue_sync`'s): see [`app_transaction::connecting`] and
    ///   [`app_transaction::connecting_sync`].
    pub fn new(
        driver: Arc<dyn Driver>,
        another: impl Fn(usize) -> Arc<dyn Driver> + Send + Sync + 'static,
        begin: app_transaction::Begin,
        begin_sync: app_transaction::BeginSync,
    ) -> TestDb {
        TestDb { driver, _guards: Vec::new(), another: Box::new(another), begin, begin_sync }
    }

    /// Keeps `guard` (a test database removed when dropped, a pooler in front of it) until
    /// the case ends. Guards are dropped after the driver, in the order they were given.
    pub fn keep_alive(mut self, guard: impl Any + Send + Sync) -> TestDb {
        self._guards.push(Box::new(guard));
        self
    }

    /// The case's driver.
    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// Another driver on the same database with a pool of `connections` (another node's).
    pub fn another(&self, connections: usize) -> Arc<dyn Driver> {
        (self.another)(connections)
    }

    /// A transaction on a connection of the application's own (see [`AppTransaction`]).
    pub async fn app_transaction(&self) -> Box<dyn AppTransaction> {
        (self.begin)().await
    }

    /// A transaction on a synchronous connection of the application's own (see
    /// [`SyncAppTransaction`]).
    pub fn sync_app_transaction(&self) -> Box<dyn SyncAppTransaction> {
        (self.begin_sync)()
    }

    /// A worker builder on this database with the suite's jobs, polling every 200 ms and
    /// heartbeating every 500 ms, running "work" with 10 slots.
    pub fn worker(&self) -> WorkerBuilder {
        Worker::builder(self.driver.clone())
            .queue("work", 10)
            .registry(jobs::registry())
            .poll_interval(Duration::from_millis(200))
            .heartbeat_interval(Duration::from_millis(500))
    }

    /// One job, which must exist.
    pub async fn job(&self, id: i64) -> JobRow {
        self.driver.job_get(JobGetParams { id }).await.expect("get").expect("the job exists")
    }

    /// Waits until job `id` is in `state`; returns it then.
    pub async fn wait_state(&self, id: i64, state: JobState) -> JobRow {
        wait_for(&format!("job {id} to become {state}"), DEADLINE, || async {
            let row = self.driver.job_get(JobGetParams { id }).await.ok()??;
            (row.state == state).then_some(row)
        })
        .await
    }

    /// How many jobs are in `state` (exactly, up to a million).
    pub async fn count(&self, state: Option<JobState>) -> i64 {
        let filter = JobFilter { states: state.into_iter().collect(), ..JobFilter::default() };
        match self.driver.job_count(JobCountParams { filter: &filter, cap: 1_000_000 }).await.expect("count")
        {
            Count::Exact(n) => n,
            other => panic!("expected an exact count, got {other:?}"),
        }
    }

    /// Every job, oldest first.
    pub async fn all_jobs(&self) -> Vec<JobRow> {
        let filter = JobFilter::default();
        let mut all = Vec::new();
        let mut before = None;
        loop {
            let page = self.driver.job_list(JobListParams { filter: &filter, before, limit: 10_000 }).await;
            let page = page.expect("list");
            let Some(last) = page.last() else { break };
            before = Some(last.id);
            all.extend(page);
        }
        all.reverse();
        all
    }
}
