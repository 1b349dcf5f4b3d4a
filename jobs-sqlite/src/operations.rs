//! `impl Driver for SqliteDriver`: each operation hands its parameters, owned, to the
//! module that owns its SQL, run on a pooled connection's thread (`exec`).

use std::any::Any;

use async_trait::async_trait;
use jobs_driver::*;

use crate::driver::{CAPABILITIES, SqliteDriver};
use crate::exec::{in_transaction, read, write};
use crate::jobs::{complete, control, due, insert, insert_full, list, maintenance, prune, read as jobs_read};
use crate::time::{millis, now_ms};
use crate::{
    kind_stats, leader, listener, migrate, nodes, queue_limits, queue_settings, queues, schedules, server,
    stats,
};

#[async_trait]
impl Driver for SqliteDriver {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn pool(&self) -> &(dyn Any + Send + Sync) {
        &self.pool
    }

    async fn migrate(&self) -> Result<Vec<String>> {
        write(&self.local, migrate::run_pending).await
    }

    async fn listen(&self) -> Result<Option<Box<dyn Listener>>> {
        let listener = listener::listen(&self.pool, self.local.clone(), self.notification_poll).await?;
        Ok(Some(Box::new(listener)))
    }

    async fn job_insert_many(&self, params: JobInsertManyParams<'_>) -> Result<Vec<Inserted>> {
        let jobs = params.jobs.to_vec();
        let now = now_ms(params.now);
        self.write_notifying(move |c| insert::insert_many_sync(c, &jobs, now)).await
    }

    async fn job_insert_full_many(&self, params: JobInsertFullManyParams<'_>) -> Result<Vec<i64>> {
        let jobs = params.jobs.to_vec();
        write(&self.local, move |c| insert_full::insert_full_many(c, &jobs)).await
    }

    async fn job_claim(&self, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>> {
        write(&self.local, queue_limits::ClaimRequest::of(&params).run()).await
    }

    async fn job_complete_many(&self, params: JobCompleteManyParams<'_>) -> Result<Vec<i64>> {
        let completions = params.completions.to_vec();
        let now = params.now;
        write(&self.local, move |c| complete::complete_many(c, &completions, now_ms(now))).await
    }

    async fn job_schedule_due(&self, params: JobScheduleDueParams) -> Result<i64> {
        let now = params.now;
        self.write_notifying(move |c| due::schedule_due(c, params.limit, now_ms(now))).await
    }

    async fn job_rescue_stuck(&self, params: JobRescueStuckParams<'_>) -> Result<Vec<i64>> {
        let JobRescueStuckParams {
            node_stale_after,
            lock_lost_grace,
            timeout_grace,
            lost_nodes,
            lost_nodes_by_lock,
            max_node_losses,
            limit,
            rescuer,
            now,
        } = params;
        let rescuer = rescuer.to_owned();
        self.write_notifying(move |c| {
            let params = JobRescueStuckParams {
                node_stale_after,
                lock_lost_grace,
                timeout_grace,
                lost_nodes,
                lost_nodes_by_lock,
                max_node_losses,
                limit,
                rescuer: &rescuer,
                now,
            };
            maintenance::rescue_stuck(c, &params)
        })
        .await
    }

    async fn job_release_orphans(&self, params: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>> {
        let JobReleaseOrphansParams { node, held, grace, now } = params;
        let (node, held) = (node.to_owned(), held.to_vec());
        self.write_notifying(move |c| {
            let params = JobReleaseOrphansParams { node: &node, held: &held, grace, now };
            maintenance::release_orphans(c, &params)
        })
        .await
    }

    async fn job_archive(&self, _params: JobArchiveParams) -> Result<i64> {
        // No archive (no `Capability::Archive`): SQLite rewrites a row in place, and has
        // no vacuum pass that a growing table of finished jobs would slow down.
        Ok(0)
    }

    async fn job_prune(&self, params: JobPruneParams) -> Result<i64> {
        write(&self.local, move |c| prune::prune(c, &params)).await
    }

    async fn job_cancel_many(&self, params: JobCancelManyParams<'_>) -> Result<Vec<JobState>> {
        let now = now_ms(None);
        let states = in_transaction!(self, |c| control::cancel_many(c, params.ids, now).await)?;
        self.settle_eagerly(params.ids).await;
        Ok(states)
    }

    async fn job_retry_many(&self, params: JobRetryManyParams<'_>) -> Result<Retried> {
        let now = now_ms(None);
        in_transaction!(self, |c| crate::workflows::retry_and_reopen(c, params.ids, now).await)
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
        let job_id = params.job_id;
        read(&self.pool, move |c| crate::workflows::dependencies(c, job_id)).await
    }

    async fn workflow_get(&self, params: WorkflowGetParams) -> Result<Option<WorkflowInfo>> {
        read(&self.pool, move |c| crate::workflows::workflow_get(c, params.id)).await
    }

    async fn workflow_prune(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        self.prune_workflows(params).await
    }

    async fn job_get(&self, params: JobGetParams) -> Result<Option<JobRow>> {
        read(&self.pool, move |c| jobs_read::get(c, params.id)).await
    }

    async fn job_list(&self, params: JobListParams<'_>) -> Result<Vec<JobRow>> {
        let (filter, before, limit) = (params.filter.clone(), params.before, params.limit);
        read(&self.pool, move |c| list::list(c, &filter, before, limit)).await
    }

    async fn job_list_ids(&self, params: JobListParams<'_>) -> Result<Vec<i64>> {
        let (filter, before, limit) = (params.filter.clone(), params.before, params.limit);
        read(&self.pool, move |c| list::list_ids(c, &filter, before, limit)).await
    }

    async fn job_count(&self, params: JobCountParams<'_>) -> Result<Count> {
        let (filter, cap) = (params.filter.clone(), params.cap);
        read(&self.pool, move |c| list::count(c, &filter, cap)).await
    }

    async fn job_count_by_queue_and_state(
        &self,
        _params: JobCountByQueueAndStateParams,
    ) -> Result<Vec<(String, JobState, i64)>> {
        read(&self.pool, list::counts_by_queue_and_state).await
    }

    async fn job_list_waiting(&self, params: JobListWaitingParams<'_>) -> Result<Vec<JobRow>> {
        let (kind, queue, args) = jobs_read::waiting_params(&params);
        read(&self.pool, move |c| jobs_read::list_waiting(c, kind, queue, args)).await
    }

    async fn job_list_cancel_requested(&self, params: JobListCancelRequestedParams<'_>) -> Result<Vec<i64>> {
        let ids = params.ids.to_vec();
        read(&self.pool, move |c| jobs_read::list_cancel_requested(c, &ids)).await
    }

    async fn queue_set_paused(&self, params: QueueSetPausedParams<'_>) -> Result<()> {
        let now = now_ms(None);
        in_transaction!(self, |c| {
            let told = queues::set_paused(c, params.queue, params.paused, now).await?;
            Ok(((), vec![told]))
        })
    }

    async fn queue_is_paused(&self, params: QueueIsPausedParams<'_>) -> Result<bool> {
        let queue = params.queue.to_owned();
        read(&self.pool, move |c| queues::is_paused(c, &queue)).await
    }

    async fn queue_list_paused(&self, _params: QueueListPausedParams) -> Result<Vec<String>> {
        read(&self.pool, queues::list_paused).await
    }

    async fn queue_list_depths(&self, _params: QueueListDepthsParams) -> Result<Vec<QueueDepth>> {
        let now = now_ms(None);
        read(&self.pool, move |c| queues::list_depths(c, now)).await
    }

    async fn queue_set_concurrency(&self, params: QueueSetConcurrencyParams<'_>) -> Result<()> {
        let (queue, concurrency, now) = (params.queue.to_owned(), params.concurrency, now_ms(None));
        write(&self.local, move |c| queue_settings::set_concurrency(c, &queue, concurrency, now)).await
    }

    async fn queue_set_limits(&self, params: QueueSetLimitsParams<'_>) -> Result<()> {
        let QueueSetLimitsParams { queue, global_limit, per_key_limit, rate, per_key_rate } = params;
        let (queue, now) = (queue.to_owned(), now_ms(None));
        write(&self.local, move |c| {
            queue_settings::set_limits(c, &queue, global_limit, per_key_limit, rate, per_key_rate, now)
        })
        .await
    }

    async fn queue_settings(&self, params: QueueSettingsParams<'_>) -> Result<Vec<QueueSettings>> {
        let queue = params.queue.map(str::to_owned);
        read(&self.pool, move |c| queue_settings::settings(c, queue.as_deref())).await
    }

    async fn queue_limits_usage(&self, params: QueueLimitsUsageParams<'_>) -> Result<LimitsUsage> {
        let (queue, QueueLimitsUsageParams { per_key_limit, top, cap, .. }) =
            (params.queue.to_owned(), params);
        let now = now_ms(None);
        read(&self.pool, move |c| queue_settings::limits_usage(c, &queue, per_key_limit, top, cap, now)).await
    }

    async fn node_heartbeat(&self, params: NodeHeartbeatParams<'_>) -> Result<()> {
        nodes::heartbeat_through(&self.local, params).await
    }

    async fn node_hold(&self, params: NodeHoldParams<'_>) -> Result<NodeHold> {
        let (path, node) = (self.path().to_path_buf(), params.node.to_owned());
        tokio::task::spawn_blocking(move || crate::liveness::hold(&path, &node))
            .await
            .map_err(|e| DriverError::Runtime(format!("taking the node's lock file: {e}")))?
    }

    async fn node_delete(&self, params: NodeDeleteParams<'_>) -> Result<()> {
        let node = params.node.to_owned();
        write(&self.local, move |c| nodes::delete(c, &node)).await
    }

    async fn node_delete_stale(&self, params: NodeDeleteStaleParams) -> Result<i64> {
        let (older_than, now) = (millis(params.older_than), now_ms(params.now));
        write(&self.local, move |c| nodes::delete_stale(c, older_than, now)).await
    }

    async fn node_list(&self, _params: NodeListParams) -> Result<Vec<NodeRow>> {
        read(&self.pool, nodes::list).await
    }

    async fn leader_try_acquire(&self, params: LeaderTryAcquireParams<'_>) -> Result<bool> {
        leader::try_acquire_through(&self.local, params).await
    }

    async fn leader_release(&self, params: LeaderReleaseParams<'_>) -> Result<()> {
        let (name, node) = (params.name.to_owned(), params.node.to_owned());
        write(&self.local, move |c| leader::release(c, &LeaderReleaseParams { name: &name, node: &node }))
            .await
    }

    async fn leader_get(&self, params: LeaderGetParams<'_>) -> Result<Option<String>> {
        let (name, now) = (params.name.to_owned(), params.now);
        read(&self.pool, move |c| leader::get(c, &LeaderGetParams { name: &name, now })).await
    }

    async fn schedule_sync(&self, params: ScheduleSyncParams<'_>) -> Result<i64> {
        let (defs, retire_others) = (params.defs.to_vec(), params.retire_others);
        let now = now_ms(None);
        write(&self.local, move |c| schedules::sync(c, &defs, retire_others, now)).await
    }

    async fn schedule_fire_due(&self, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>> {
        // `decide` is borrowed, so the pass runs statement by statement on the async
        // connection rather than as one closure on its thread (a pass is rare and short).
        let now = now_ms(params.now);
        in_transaction!(self, |c| schedules::fire_due(c, now, params.decide).await)
    }

    async fn schedule_set_enabled(&self, params: ScheduleSetEnabledParams<'_>) -> Result<bool> {
        let (name, enabled) = (params.name.to_owned(), params.enabled);
        let now = now_ms(None);
        write(&self.local, move |c| schedules::set_enabled(c, &name, enabled, now)).await
    }

    async fn schedule_record_run(&self, params: ScheduleRecordRunParams<'_>) -> Result<bool> {
        let (name, job_id, now) = (params.name.to_owned(), params.job_id, now_ms(params.now));
        write(&self.local, move |c| schedules::record_manual_run(c, &name, job_id, now)).await
    }

    async fn schedule_get(&self, params: ScheduleGetParams<'_>) -> Result<Option<ScheduleRow>> {
        let name = params.name.to_owned();
        read(&self.pool, move |c| schedules::get(c, &name)).await
    }

    async fn schedule_list(&self, _params: ScheduleListParams) -> Result<Vec<ScheduleRow>> {
        read(&self.pool, schedules::list).await
    }

    async fn stats_record(&self, params: StatsRecordParams<'_>) -> Result<()> {
        let counts = stats::counted(params.counts);
        let kinds = kind_stats::counted(params.kinds);
        write(&self.local, move |c| {
            stats::record(c, &counts)?;
            kind_stats::record(c, &kinds)
        })
        .await
    }

    async fn stats_prune(&self, params: StatsPruneParams) -> Result<i64> {
        let (keep, now) = (millis(params.keep), now_ms(params.now));
        write(&self.local, move |c| stats::prune(c, keep, now)).await
    }

    async fn stats_compact(&self, params: StatsCompactParams) -> Result<i64> {
        let now = now_ms(params.now);
        let queues = now.saturating_sub(millis(params.older_than));
        let kinds = now.saturating_sub(millis(params.kinds_older_than));
        write(&self.local, move |c| kind_stats::compact(c, queues, kinds)).await
    }

    async fn stats_kinds(&self, params: StatsKindsParams) -> Result<Vec<KindStats>> {
        read(&self.pool, move |c| kind_stats::kinds(c, params)).await
    }

    async fn stats_throughput(&self, params: StatsThroughputParams) -> Result<Vec<Throughput>> {
        read(&self.pool, move |c| stats::throughput(c, params)).await
    }

    async fn server_status(&self, _params: ServerStatusParams) -> Result<ServerStatus> {
        read(&self.pool, server::status).await
    }
}
