//! `impl Driver for PgDriver` (the type is in `driver.rs`): each operation
//! takes a connection from the pool and runs the statement of the module that owns it.

use std::any::Any;

use async_trait::async_trait;
use jobs_driver::*;

use crate::driver::PgDriver;
use crate::op_conn::{on_conn, on_tx};
use crate::pool;
use crate::workflows;
use crate::{
    jobs, kind_stats, leader, listener, liveness, migrate, nodes, queue_limits, queue_settings, queues,
    schedules, server, stats, wakeups,
};

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
        let conn = pool::get(&self.pool).await?;
        if self.through_pooler {
            let applied = migrate::migrate_in_one_transaction(conn).await;
            // Connections made before the schema existed have not looked its types up
            // (see `pooler`): drop the idle ones, so that new ones are made.
            self.pool.retain(|_, _| false);
            applied
        } else {
            migrate::migrate(conn).await
        }
    }

    async fn listen(&self) -> Result<Option<Box<dyn Listener>>> {
        if !self.capabilities.has(Capability::ListenNotify) {
            return Ok(None);
        }
        let listener = match &self.listen_url {
            Some(url) => listener::listen_on(crate::pool::connect(url).await?).await?,
            None => listener::listen(&self.pool).await?,
        };
        Ok(Some(Box::new(listener)))
    }

    async fn job_insert_many(&self, params: JobInsertManyParams<'_>) -> Result<Vec<Inserted>> {
        wakeups::insert(&self.pool, params.jobs, params.now, self.through_pooler).await
    }

    async fn job_insert_full_many(&self, params: JobInsertFullManyParams<'_>) -> Result<Vec<i64>> {
        on_conn!(self, c => jobs::insert_full::insert_full_many(c, params.jobs))
    }

    async fn job_claim(&self, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>> {
        on_conn!(self, c => queue_limits::claim(c, params))
    }

    async fn job_complete_many(&self, params: JobCompleteManyParams<'_>) -> Result<Vec<i64>> {
        on_conn!(self, c => jobs::complete::complete_many(c, params.completions, params.now))
    }

    async fn job_schedule_due(&self, params: JobScheduleDueParams) -> Result<i64> {
        on_conn!(self, c => jobs::due::schedule_due(c, params))
    }

    async fn job_rescue_stuck(&self, params: JobRescueStuckParams<'_>) -> Result<Vec<i64>> {
        on_conn!(self, c => jobs::maintenance::rescue_stuck(c, params))
    }

    async fn job_release_orphans(&self, params: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>> {
        on_conn!(self, c => jobs::maintenance::release_orphans(c, params))
    }

    async fn job_archive(&self, params: JobArchiveParams) -> Result<i64> {
        on_conn!(self, c => jobs::archive::archive(c, params))
    }

    async fn job_prune(&self, params: JobPruneParams) -> Result<i64> {
        on_conn!(self, c => jobs::prune::prune(c, params))
    }

    async fn job_cancel_many(&self, params: JobCancelManyParams<'_>) -> Result<Vec<JobState>> {
        let states = on_conn!(self, c => jobs::control::cancel_many(c, params.ids))?;
        self.settle_eagerly(params.ids).await;
        Ok(states)
    }

    async fn job_retry_many(&self, params: JobRetryManyParams<'_>) -> Result<Retried> {
        on_tx!(self, c => workflows::retry_and_reopen(c, params.ids))
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
        on_conn!(self, c => workflows::dependencies(c, params.job_id))
    }

    async fn workflow_get(&self, params: WorkflowGetParams) -> Result<Option<WorkflowInfo>> {
        on_conn!(self, c => workflows::workflow_get(c, params.id))
    }

    async fn workflow_prune(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        self.prune_workflows(params).await
    }

    async fn job_get(&self, params: JobGetParams) -> Result<Option<JobRow>> {
        on_conn!(self, c => jobs::read::get(c, params.id))
    }

    async fn job_list(&self, params: JobListParams<'_>) -> Result<Vec<JobRow>> {
        self.can_filter(params.filter)?;
        on_conn!(self, c => jobs::page::list(c, params))
    }

    async fn job_list_ids(&self, params: JobListParams<'_>) -> Result<Vec<i64>> {
        self.can_filter(params.filter)?;
        on_conn!(self, c => jobs::page::list_ids(c, params))
    }

    async fn job_count(&self, params: JobCountParams<'_>) -> Result<Count> {
        self.can_filter(params.filter)?;
        let estimate = self.capabilities.has(Capability::CountEstimates);
        on_conn!(self, c => jobs::list::count(c, params.filter, params.cap, estimate))
    }

    async fn job_count_by_queue_and_state(
        &self,
        _params: JobCountByQueueAndStateParams,
    ) -> Result<Vec<(String, JobState, i64)>> {
        on_conn!(self, c => jobs::list::counts_by_queue_and_state(c))
    }

    async fn job_list_waiting(&self, params: JobListWaitingParams<'_>) -> Result<Vec<JobRow>> {
        let Some(want) = params.args.filter(|_| !self.capabilities.has(Capability::JsonContainment)) else {
            return on_conn!(self, c => jobs::read::list_waiting(c, params));
        };
        // Without containment in SQL, the arguments are matched here.
        let all = JobListWaitingParams { args: None, ..params };
        let rows = on_conn!(self, c => jobs::read::list_waiting(c, all))?;
        Ok(rows.into_iter().filter(|row| json_contains(&row.args, want)).collect())
    }

    async fn job_list_cancel_requested(&self, params: JobListCancelRequestedParams<'_>) -> Result<Vec<i64>> {
        on_conn!(self, c => jobs::read::list_cancel_requested(c, params.ids))
    }

    async fn queue_set_paused(&self, params: QueueSetPausedParams<'_>) -> Result<()> {
        on_conn!(self, c => queues::set_paused(c, params.queue, params.paused))
    }

    async fn queue_is_paused(&self, params: QueueIsPausedParams<'_>) -> Result<bool> {
        on_conn!(self, c => queues::is_paused(c, params.queue))
    }

    async fn queue_list_paused(&self, _params: QueueListPausedParams) -> Result<Vec<String>> {
        on_conn!(self, c => queues::list_paused(c))
    }

    async fn queue_list_depths(&self, _params: QueueListDepthsParams) -> Result<Vec<QueueDepth>> {
        on_conn!(self, c => queues::list_depths(c))
    }

    async fn queue_set_concurrency(&self, params: QueueSetConcurrencyParams<'_>) -> Result<()> {
        on_conn!(self, c => queue_settings::set_concurrency(c, params))
    }

    async fn queue_set_limits(&self, params: QueueSetLimitsParams<'_>) -> Result<()> {
        on_conn!(self, c => queue_settings::set_limits(c, params))
    }

    async fn queue_settings(&self, params: QueueSettingsParams<'_>) -> Result<Vec<QueueSettings>> {
        on_conn!(self, c => queue_settings::settings(c, params))
    }

    async fn queue_limits_usage(&self, params: QueueLimitsUsageParams<'_>) -> Result<LimitsUsage> {
        on_conn!(self, c => queue_settings::limits_usage(c, params))
    }

    async fn node_hold(&self, params: NodeHoldParams<'_>) -> Result<NodeHold> {
        if !self.capabilities.has(Capability::LivenessLocks) {
            return Ok(NodeHold::Unsupported(if self.through_pooler {
                "behind a pooler in transaction mode a session lock would stay with the server connection \
                 the pooler lent; give the driver a direct connection with `listen_directly`"
            } else {
                "liveness locks are switched off (`PgDriver::without`)"
            }));
        }
        let source = match (&self.listen_url, self.through_pooler) {
            (Some(url), true) => liveness::Source::Direct(url.clone()),
            (None, true) => {
                unreachable!("a driver through a pooler lacks liveness locks without a direct URL")
            }
            (_, false) => liveness::Source::Pool(self.pool.clone()),
        };
        liveness::hold(source, params.node).await
    }

    async fn node_heartbeat(&self, params: NodeHeartbeatParams<'_>) -> Result<()> {
        on_conn!(self, c => nodes::heartbeat(c, params))
    }

    async fn node_delete(&self, params: NodeDeleteParams<'_>) -> Result<()> {
        on_conn!(self, c => nodes::delete(c, params.node))
    }

    async fn node_delete_stale(&self, params: NodeDeleteStaleParams) -> Result<i64> {
        on_conn!(self, c => nodes::delete_stale(c, params))
    }

    async fn node_list(&self, _params: NodeListParams) -> Result<Vec<NodeRow>> {
        on_conn!(self, c => nodes::list(c))
    }

    async fn leader_try_acquire(&self, params: LeaderTryAcquireParams<'_>) -> Result<bool> {
        on_conn!(self, c => leader::try_acquire(c, params))
    }

    async fn leader_release(&self, params: LeaderReleaseParams<'_>) -> Result<()> {
        on_conn!(self, c => leader::release(c, params))
    }

    async fn leader_get(&self, params: LeaderGetParams<'_>) -> Result<Option<String>> {
        on_conn!(self, c => leader::get(c, params))
    }

    async fn schedule_sync(&self, params: ScheduleSyncParams<'_>) -> Result<i64> {
        on_conn!(self, c => schedules::sync(c, params))
    }

    async fn schedule_fire_due(&self, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>> {
        on_conn!(self, c => schedules::fire_due(c, params))
    }

    async fn schedule_set_enabled(&self, params: ScheduleSetEnabledParams<'_>) -> Result<bool> {
        on_conn!(self, c => schedules::set_enabled(c, params.name, params.enabled))
    }

    async fn schedule_record_run(&self, params: ScheduleRecordRunParams<'_>) -> Result<bool> {
        on_conn!(self, c => schedules::record_manual_run(c, params))
    }

    async fn schedule_get(&self, params: ScheduleGetParams<'_>) -> Result<Option<ScheduleRow>> {
        on_conn!(self, c => schedules::get(c, params.name))
    }

    async fn schedule_list(&self, _params: ScheduleListParams) -> Result<Vec<ScheduleRow>> {
        on_conn!(self, c => schedules::list(c))
    }

    async fn stats_record(&self, params: StatsRecordParams<'_>) -> Result<()> {
        on_conn!(self, c => kind_stats::record_with_queues(c, params))
    }

    async fn stats_prune(&self, params: StatsPruneParams) -> Result<i64> {
        let by_queue = on_conn!(self, c => stats::prune(c, params))?;
        Ok(by_queue + on_conn!(self, c => kind_stats::prune(c, params))?)
    }

    async fn stats_compact(&self, params: StatsCompactParams) -> Result<i64> {
        on_conn!(self, c => kind_stats::compact(c, params))
    }

    async fn stats_kinds(&self, params: StatsKindsParams) -> Result<Vec<KindStats>> {
        on_conn!(self, c => kind_stats::kinds(c, params))
    }

    async fn stats_throughput(&self, params: StatsThroughputParams) -> Result<Vec<Throughput>> {
        on_conn!(self, c => stats::throughput(c, params))
    }

    async fn server_status(&self, _params: ServerStatusParams) -> Result<ServerStatus> {
        on_conn!(self, c => server::status(c))
    }
}
