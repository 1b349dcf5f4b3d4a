//! `impl Driver for MysqlDriver`: each operation hands its parameters to the module that
//! owns its SQL.

use std::any::Any;

use async_trait::async_trait;
use diesel_async::AsyncConnection;
use jobs_driver::*;

use crate::driver::{CAPABILITIES, MysqlDriver};

use crate::jobs::{complete, control, due, insert, insert_full, list, maintenance, prune, read as jobs_read};
use crate::{
    kind_stats, leader, listener, migrate, nodes, queue_limits, queue_settings, queues, schedules, server,
    stats, wakeups,
};

use crate::exec::{in_transaction, on_connection};

#[async_trait]
impl Driver for MysqlDriver {
    fn name(&self) -> &'static str {
        "mysql"
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn pool(&self) -> &(dyn Any + Send + Sync) {
        &self.pool
    }

    async fn migrate(&self) -> Result<Vec<String>> {
        migrate::migrate(crate::pool::get(&self.pool).await?).await
    }

    async fn listen(&self) -> Result<Option<Box<dyn Listener>>> {
        Ok(Some(Box::new(listener::listen(&self.pool, &self.hub, self.notification_poll).await?)))
    }

    async fn job_insert_many(&self, params: JobInsertManyParams<'_>) -> Result<Vec<Inserted>> {
        let JobInsertManyParams { jobs, now } = params;
        if wakeups::rationed(self, jobs) {
            let (inserted, told) = on_connection!(self, |c| insert::insert_rows(c, jobs, now).await)?;
            wakeups::after_rationed(self, &told);
            return Ok(inserted);
        }
        in_transaction!(self, |tx| insert::insert_many(tx, jobs, now).await)
    }

    async fn job_insert_full_many(&self, params: JobInsertFullManyParams<'_>) -> Result<Vec<i64>> {
        on_connection!(self, |c| insert_full::insert_full_many(c, params.jobs).await)
    }

    async fn job_claim(&self, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>> {
        on_connection!(self, |c| queue_limits::claim(c, params).await)
    }

    async fn job_complete_many(&self, params: JobCompleteManyParams<'_>) -> Result<Vec<i64>> {
        on_connection!(self, |c| complete::complete_many(c, params.completions, params.now).await)
    }

    async fn job_schedule_due(&self, params: JobScheduleDueParams) -> Result<i64> {
        let (moved, told) = on_connection!(self, |c| due::schedule_due(c, params).await)?;
        self.deliver(&told);
        Ok(moved)
    }

    async fn job_rescue_stuck(&self, params: JobRescueStuckParams<'_>) -> Result<Vec<i64>> {
        let (ids, told) = on_connection!(self, |c| maintenance::rescue_stuck(c, params).await)?;
        self.deliver(&told);
        Ok(ids)
    }

    async fn job_release_orphans(&self, params: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>> {
        let (ids, told) = on_connection!(self, |c| maintenance::release_orphans(c, params).await)?;
        self.deliver(&told);
        Ok(ids)
    }

    async fn job_archive(&self, _params: JobArchiveParams) -> Result<i64> {
        // No archive (no `Capability::Archive`): InnoDB updates a row in place and purges
        // only the undo log, so finished rows kept in `jobs` cost the queue no vacuum pass.
        Ok(0)
    }

    async fn job_prune(&self, params: JobPruneParams) -> Result<i64> {
        on_connection!(self, |c| prune::prune(c, params).await)
    }

    async fn job_cancel_many(&self, params: JobCancelManyParams<'_>) -> Result<Vec<JobState>> {
        let ids = params.ids;
        let states = in_transaction!(self, |tx| control::cancel_many(tx, ids).await)?;
        self.settle_eagerly(ids).await;
        Ok(states)
    }

    async fn job_retry_many(&self, params: JobRetryManyParams<'_>) -> Result<Retried> {
        let ids = params.ids;
        in_transaction!(self, |tx| crate::workflows::retry_and_reopen(tx, ids).await)
    }

    async fn job_delete_many(&self, params: JobDeleteManyParams<'_>) -> Result<i64> {
        self.delete(params.ids).await
    }

    async fn job_insert_workflow(&self, params: JobInsertWorkflowParams<'_>) -> Result<InsertedWorkflow> {
        self.insert_workflow(params).await
    }

    async fn job_batch(&self, params: JobBatchParams<'_>) -> Result<BatchChanged> {
        self.batch(params).await
    }

    async fn job_settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        self.settle(params).await
    }

    async fn job_dependencies(&self, params: JobDependenciesParams) -> Result<Vec<Dependency>> {
        on_connection!(self, |c| crate::workflows::reads::dependencies(c, params.job_id).await)
    }

    async fn workflow_get(&self, params: WorkflowGetParams) -> Result<Option<WorkflowInfo>> {
        on_connection!(self, |c| crate::workflows::reads::workflow_get(c, params.id).await)
    }

    async fn workflow_prune(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        self.prune_workflows(params).await
    }

    async fn job_get(&self, params: JobGetParams) -> Result<Option<JobRow>> {
        on_connection!(self, |c| jobs_read::get(c, params.id).await)
    }

    async fn job_list(&self, params: JobListParams<'_>) -> Result<Vec<JobRow>> {
        on_connection!(self, |c| list::list(c, params.filter, params.before, params.limit).await)
    }

    async fn job_list_ids(&self, params: JobListParams<'_>) -> Result<Vec<i64>> {
        on_connection!(self, |c| list::list_ids(c, params.filter, params.before, params.limit).await)
    }

    async fn job_count(&self, params: JobCountParams<'_>) -> Result<Count> {
        on_connection!(self, |c| list::count(c, params.filter, params.cap).await)
    }

    async fn job_count_by_queue_and_state(
        &self,
        _params: JobCountByQueueAndStateParams,
    ) -> Result<Vec<(String, JobState, i64)>> {
        on_connection!(self, |c| list::counts_by_queue_and_state(c).await)
    }

    async fn job_list_waiting(&self, params: JobListWaitingParams<'_>) -> Result<Vec<JobRow>> {
        on_connection!(self, |c| jobs_read::list_waiting(c, params.kind, params.queue, params.args).await)
    }

    async fn job_list_cancel_requested(&self, params: JobListCancelRequestedParams<'_>) -> Result<Vec<i64>> {
        on_connection!(self, |c| jobs_read::list_cancel_requested(c, params.ids).await)
    }

    async fn queue_set_paused(&self, params: QueueSetPausedParams<'_>) -> Result<()> {
        let QueueSetPausedParams { queue, paused } = params;
        in_transaction!(self, |tx| {
            let told = queues::set_paused(tx, queue, paused).await?;
            Ok(((), vec![told]))
        })
    }

    async fn queue_is_paused(&self, params: QueueIsPausedParams<'_>) -> Result<bool> {
        on_connection!(self, |c| queues::is_paused(c, params.queue).await)
    }

    async fn queue_list_paused(&self, _params: QueueListPausedParams) -> Result<Vec<String>> {
        on_connection!(self, |c| queues::list_paused(c).await)
    }

    async fn queue_list_depths(&self, _params: QueueListDepthsParams) -> Result<Vec<QueueDepth>> {
        on_connection!(self, |c| queues::list_depths(c).await)
    }

    async fn queue_set_concurrency(&self, params: QueueSetConcurrencyParams<'_>) -> Result<()> {
        on_connection!(self, |c| queue_settings::set_concurrency(c, params).await)
    }

    async fn queue_set_limits(&self, params: QueueSetLimitsParams<'_>) -> Result<()> {
        on_connection!(self, |c| queue_settings::set_limits(c, params).await)
    }

    async fn queue_settings(&self, params: QueueSettingsParams<'_>) -> Result<Vec<QueueSettings>> {
        on_connection!(self, |c| queue_settings::settings(c, params).await)
    }

    async fn queue_limits_usage(&self, params: QueueLimitsUsageParams<'_>) -> Result<LimitsUsage> {
        on_connection!(self, |c| queue_settings::limits_usage(c, params).await)
    }

    async fn node_hold(&self, params: NodeHoldParams<'_>) -> Result<NodeHold> {
        crate::liveness::hold(&self.pool, params.node).await
    }

    async fn node_heartbeat(&self, params: NodeHeartbeatParams<'_>) -> Result<()> {
        on_connection!(self, |c| nodes::heartbeat(c, params).await)
    }

    async fn node_delete(&self, params: NodeDeleteParams<'_>) -> Result<()> {
        on_connection!(self, |c| nodes::delete(c, params.node).await)
    }

    async fn node_delete_stale(&self, params: NodeDeleteStaleParams) -> Result<i64> {
        on_connection!(self, |c| nodes::delete_stale(c, params).await)
    }

    async fn node_list(&self, _params: NodeListParams) -> Result<Vec<NodeRow>> {
        on_connection!(self, |c| nodes::list(c).await)
    }

    async fn leader_try_acquire(&self, params: LeaderTryAcquireParams<'_>) -> Result<bool> {
        on_connection!(self, |c| leader::try_acquire(c, params).await)
    }

    async fn leader_release(&self, params: LeaderReleaseParams<'_>) -> Result<()> {
        on_connection!(self, |c| leader::release(c, params).await)
    }

    async fn leader_get(&self, params: LeaderGetParams<'_>) -> Result<Option<String>> {
        on_connection!(self, |c| leader::get(c, params).await)
    }

    async fn schedule_sync(&self, params: ScheduleSyncParams<'_>) -> Result<i64> {
        on_connection!(self, |c| schedules::sync(c, params).await)
    }

    async fn schedule_fire_due(&self, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>> {
        let (fired, told) = on_connection!(self, |c| schedules::fire_due(c, params).await)?;
        self.deliver(&told);
        Ok(fired)
    }

    async fn schedule_set_enabled(&self, params: ScheduleSetEnabledParams<'_>) -> Result<bool> {
        on_connection!(self, |c| schedules::set_enabled(c, params.name, params.enabled).await)
    }

    async fn schedule_record_run(&self, params: ScheduleRecordRunParams<'_>) -> Result<bool> {
        on_connection!(self, |c| schedules::record_manual_run(c, params).await)
    }

    async fn schedule_get(&self, params: ScheduleGetParams<'_>) -> Result<Option<ScheduleRow>> {
        on_connection!(self, |c| schedules::get(c, params.name).await)
    }

    async fn schedule_list(&self, _params: ScheduleListParams) -> Result<Vec<ScheduleRow>> {
        on_connection!(self, |c| schedules::list(c).await)
    }

    async fn stats_record(&self, params: StatsRecordParams<'_>) -> Result<()> {
        // Both in one transaction: a failed write is retried whole, never counted twice.
        on_connection!(self, |c| {
            c.transaction::<(), DriverError, _>(async |tx| {
                stats::record(tx, params.counts).await?;
                kind_stats::record(tx, params.kinds).await
            })
            .await
        })
    }

    async fn stats_prune(&self, params: StatsPruneParams) -> Result<i64> {
        on_connection!(self, |c| stats::prune(c, params).await)
    }

    async fn stats_compact(&self, params: StatsCompactParams) -> Result<i64> {
        on_connection!(self, |c| kind_stats::compact(c, params).await)
    }

    async fn stats_kinds(&self, params: StatsKindsParams) -> Result<Vec<KindStats>> {
        on_connection!(self, |c| kind_stats::kinds(c, params).await)
    }

    async fn stats_throughput(&self, params: StatsThroughputParams) -> Result<Vec<Throughput>> {
        on_connection!(self, |c| stats::throughput(c, params).await)
    }

    async fn server_status(&self, _params: ServerStatusParams) -> Result<ServerStatus> {
        on_connection!(self, |c| server::status(c).await)
    }
}
