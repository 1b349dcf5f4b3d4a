//! [`PgDriver`]: the [`Driver`] on a Postgres pool. Each operation takes a connection from
//! the pool and runs the statement of the module that owns it.

use std::any::Any;

use async_trait::async_trait;
use jobs_driver::*;

use crate::pool::{self, Pool, PooledConnection};
use crate::{jobs, leader, listener, migrate, nodes, queues, schedules, stats, wakeups};

/// The Postgres driver: every capability (LISTEN/NOTIFY, SKIP LOCKED, planner estimates,
/// `jsonb` containment, RETURNING), unless told to do without one ([`without`](Self::without)).
///
/// Cheap to clone (the pool is shared). `Worker::builder`, `DashboardConfig::new` and the
/// enqueue API accept a [`Pool`] directly and wrap it in one.
#[derive(Clone)]
pub struct PgDriver {
    pool: Pool,
    capabilities: Capabilities,
}

impl std::fmt::Debug for PgDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PgDriver")
            .field("pool_size", &status.size)
            .field("max_size", &status.max_size)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

impl PgDriver {
    /// The driver on `pool`. Size the pool for the worker's claims, its completer,
    /// heartbeat and listener, the dashboard, and the connections jobs take themselves.
    pub fn new(pool: Pool) -> PgDriver {
        PgDriver { pool, capabilities: Capabilities::ALL }
    }

    /// The same driver declaring that it lacks `capability`, and doing without it:
    /// - [`ListenNotify`](Capability::ListenNotify): no listener (the database sits behind a
    ///   pooler in transaction mode, where LISTEN does not work); workers poll, and learn of
    ///   cancellations at their heartbeat;
    /// - [`CountEstimates`](Capability::CountEstimates): counts past their cap are
    ///   `Count::AtLeast`;
    /// - [`JsonContainment`](Capability::JsonContainment): no search of arguments and
    ///   metadata (the dashboard hides it);
    /// - the others are declared lacking; the engine keeps one claim in flight per queue
    ///   without [`SkipLocked`](Capability::SkipLocked).
    pub fn without(mut self, capability: Capability) -> PgDriver {
        self.capabilities = self.capabilities.without(capability);
        self
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn conn(&self) -> Result<PooledConnection> {
        pool::get(&self.pool).await
    }

    /// A filter this driver can apply: a search needs JSON containment.
    fn can_filter(&self, filter: &JobFilter) -> Result<()> {
        if filter.search.is_some() && !self.capabilities.has(Capability::JsonContainment) {
            return Err(DriverError::Unsupported {
                driver: "postgres",
                operation: "search arguments and metadata (JSON containment is switched off)",
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Driver for PgDriver {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn pool(&self) -> &(dyn Any + Send + Sync) {
        &self.pool
    }

    async fn migrate(&self) -> Result<Vec<String>> {
        migrate::migrate(self.conn().await?).await
    }

    async fn listen(&self) -> Result<Option<Box<dyn Listener>>> {
        if !self.capabilities.has(Capability::ListenNotify) {
            return Ok(None);
        }
        Ok(Some(Box::new(listener::listen(&self.pool).await?)))
    }

    async fn job_insert_many(&self, params: JobInsertManyParams<'_>) -> Result<Vec<Inserted>> {
        wakeups::insert_through_pool(&self.pool, params.jobs, params.now).await
    }

    async fn job_insert_full_many(&self, params: JobInsertFullManyParams<'_>) -> Result<Vec<i64>> {
        jobs::insert_full::insert_full_many(&mut self.conn().await?, params.jobs).await
    }

    async fn job_claim(&self, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>> {
        jobs::claim::claim(&mut self.conn().await?, params).await
    }

    async fn job_complete_many(&self, params: JobCompleteManyParams<'_>) -> Result<Vec<i64>> {
        jobs::complete::complete_many(&mut self.conn().await?, params.completions, params.now).await
    }

    async fn job_schedule_due(&self, params: JobScheduleDueParams) -> Result<i64> {
        jobs::maintenance::schedule_due(&mut self.conn().await?, params).await
    }

    async fn job_rescue_stuck(&self, params: JobRescueStuckParams<'_>) -> Result<Vec<i64>> {
        jobs::maintenance::rescue_stuck(&mut self.conn().await?, params).await
    }

    async fn job_release_orphans(&self, params: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>> {
        jobs::maintenance::release_orphans(&mut self.conn().await?, params).await
    }

    async fn job_prune(&self, params: JobPruneParams) -> Result<i64> {
        jobs::maintenance::prune(&mut self.conn().await?, params).await
    }

    async fn job_cancel_many(&self, params: JobCancelManyParams<'_>) -> Result<Vec<JobState>> {
        jobs::control::cancel_many(&mut self.conn().await?, params.ids).await
    }

    async fn job_retry_many(&self, params: JobRetryManyParams<'_>) -> Result<i64> {
        jobs::control::retry_many(&mut self.conn().await?, params.ids).await
    }

    async fn job_delete_many(&self, params: JobDeleteManyParams<'_>) -> Result<i64> {
        jobs::control::delete_many(&mut self.conn().await?, params.ids).await
    }

    async fn job_get(&self, params: JobGetParams) -> Result<Option<JobRow>> {
        jobs::read::get(&mut self.conn().await?, params.id).await
    }

    async fn job_list(&self, params: JobListParams<'_>) -> Result<Vec<JobRow>> {
        self.can_filter(params.filter)?;
        jobs::list::list(&mut self.conn().await?, params).await
    }

    async fn job_list_ids(&self, params: JobListParams<'_>) -> Result<Vec<i64>> {
        self.can_filter(params.filter)?;
        jobs::list::list_ids(&mut self.conn().await?, params).await
    }

    async fn job_count(&self, params: JobCountParams<'_>) -> Result<Count> {
        self.can_filter(params.filter)?;
        let estimate = self.capabilities.has(Capability::CountEstimates);
        jobs::list::count(&mut self.conn().await?, params.filter, params.cap, estimate).await
    }

    async fn job_count_by_queue_and_state(
        &self,
        _params: JobCountByQueueAndStateParams,
    ) -> Result<Vec<(String, JobState, i64)>> {
        jobs::list::counts_by_queue_and_state(&mut self.conn().await?).await
    }

    async fn job_list_waiting(&self, params: JobListWaitingParams<'_>) -> Result<Vec<JobRow>> {
        let Some(want) = params.args.filter(|_| !self.capabilities.has(Capability::JsonContainment)) else {
            return jobs::read::list_waiting(&mut self.conn().await?, params).await;
        };
        // Without containment in SQL, the arguments are matched here.
        let all = JobListWaitingParams { args: None, ..params };
        let rows = jobs::read::list_waiting(&mut self.conn().await?, all).await?;
        Ok(rows.into_iter().filter(|row| json_contains(&row.args, want)).collect())
    }

    async fn job_list_cancel_requested(&self, params: JobListCancelRequestedParams<'_>) -> Result<Vec<i64>> {
        jobs::read::list_cancel_requested(&mut self.conn().await?, params.ids).await
    }

    async fn queue_set_paused(&self, params: QueueSetPausedParams<'_>) -> Result<()> {
        queues::set_paused(&mut self.conn().await?, params.queue, params.paused).await
    }

    async fn queue_is_paused(&self, params: QueueIsPausedParams<'_>) -> Result<bool> {
        queues::is_paused(&mut self.conn().await?, params.queue).await
    }

    async fn queue_list_paused(&self, _params: QueueListPausedParams) -> Result<Vec<String>> {
        queues::list_paused(&mut self.conn().await?).await
    }

    async fn queue_list_depths(&self, _params: QueueListDepthsParams) -> Result<Vec<QueueDepth>> {
        queues::list_depths(&mut self.conn().await?).await
    }

    async fn node_heartbeat(&self, params: NodeHeartbeatParams<'_>) -> Result<()> {
        nodes::heartbeat(&mut self.conn().await?, params).await
    }

    async fn node_delete(&self, params: NodeDeleteParams<'_>) -> Result<()> {
        nodes::delete(&mut self.conn().await?, params.node).await
    }

    async fn node_delete_stale(&self, params: NodeDeleteStaleParams) -> Result<i64> {
        nodes::delete_stale(&mut self.conn().await?, params).await
    }

    async fn node_list(&self, _params: NodeListParams) -> Result<Vec<NodeRow>> {
        nodes::list(&mut self.conn().await?).await
    }

    async fn leader_try_acquire(&self, params: LeaderTryAcquireParams<'_>) -> Result<bool> {
        leader::try_acquire(&mut self.conn().await?, params).await
    }

    async fn leader_release(&self, params: LeaderReleaseParams<'_>) -> Result<()> {
        leader::release(&mut self.conn().await?, params).await
    }

    async fn leader_get(&self, params: LeaderGetParams<'_>) -> Result<Option<String>> {
        leader::get(&mut self.conn().await?, params).await
    }

    async fn schedule_sync(&self, params: ScheduleSyncParams<'_>) -> Result<i64> {
        schedules::sync(&mut self.conn().await?, params).await
    }

    async fn schedule_fire_due(&self, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>> {
        schedules::fire_due(&mut self.conn().await?, params).await
    }

    async fn schedule_set_enabled(&self, params: ScheduleSetEnabledParams<'_>) -> Result<bool> {
        schedules::set_enabled(&mut self.conn().await?, params.name, params.enabled).await
    }

    async fn schedule_get(&self, params: ScheduleGetParams<'_>) -> Result<Option<ScheduleRow>> {
        schedules::get(&mut self.conn().await?, params.name).await
    }

    async fn schedule_list(&self, _params: ScheduleListParams) -> Result<Vec<ScheduleRow>> {
        schedules::list(&mut self.conn().await?).await
    }

    async fn stats_record(&self, params: StatsRecordParams<'_>) -> Result<()> {
        stats::record(&mut self.conn().await?, params.counts).await
    }

    async fn stats_prune(&self, params: StatsPruneParams) -> Result<i64> {
        stats::prune(&mut self.conn().await?, params).await
    }

    async fn stats_throughput(&self, _params: StatsThroughputParams) -> Result<Vec<Throughput>> {
        stats::throughput(&mut self.conn().await?).await
    }
}
