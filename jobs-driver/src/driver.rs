//! The [`Driver`] trait: every operation the engine performs on a database.

use std::any::Any;

use async_trait::async_trait;

use crate::capability::Capabilities;
use crate::error::Result;
use crate::job::*;
use crate::kind_stats::*;
use crate::leader::*;
use crate::node::*;
use crate::notification::Notification;
use crate::queue::*;
use crate::schedule::*;
use crate::server::*;
use crate::state::JobState;
use crate::stats::*;
use crate::workflow::{
    BatchChanged, Dependency, InsertedWorkflow, JobBatchParams, JobDependenciesParams,
    JobInsertWorkflowParams, JobSettleParams, Settled, WorkflowGetParams, WorkflowInfo, WorkflowPruneParams,
    WorkflowPruned,
};

/// A database the engine can run on. One implementation per backend owns all of that
/// backend's SQL; the engine (workers, maintenance services, cron, the dashboard, the CLI,
/// the testing helpers) calls only these operations.
///
/// Operations are named entity + verb and take one parameter struct each, documented at
/// the struct (e.g. [`JobClaimParams`]). Each runs on a connection of the driver's own
/// pool and commits by itself, except where its parameters say otherwise.
///
/// A driver declares its [`Capabilities`]; the engine checks them before relying on a
/// capability (it polls where [`listen`](Driver::listen) has nothing to offer), and an
/// operation a driver cannot perform returns
/// [`DriverError::Unsupported`](crate::DriverError::Unsupported).
#[async_trait]
pub trait Driver: Send + Sync + std::fmt::Debug + 'static {
    /// The backend's name: `postgres`, `sqlite`, `mysql`, …
    fn name(&self) -> &'static str;

    /// What the backend can do.
    fn capabilities(&self) -> Capabilities;

    /// The driver's connection pool, for jobs' own queries: downcast it to the backend's
    /// pool type (`JobContext::pool_as`).
    fn pool(&self) -> &(dyn Any + Send + Sync);

    /// Applies the pending schema migrations; returns the versions applied.
    async fn migrate(&self) -> Result<Vec<String>>;

    /// A connection that receives [`Notification`]s, or `None` when the backend has no
    /// [`ListenNotify`](crate::Capability::ListenNotify) (the engine then polls).
    async fn listen(&self) -> Result<Option<Box<dyn Listener>>>;

    // --- jobs: writes ---

    /// See [`JobInsertManyParams`]. Commits by itself and wakes the queues' workers.
    async fn job_insert_many(&self, params: JobInsertManyParams<'_>) -> Result<Vec<Inserted>>;
    /// See [`JobInsertFullManyParams`]. Returns the new ids, in input order.
    async fn job_insert_full_many(&self, params: JobInsertFullManyParams<'_>) -> Result<Vec<i64>>;
    /// See [`JobClaimParams`].
    async fn job_claim(&self, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>>;
    /// See [`JobCompleteManyParams`].
    async fn job_complete_many(&self, params: JobCompleteManyParams<'_>) -> Result<Vec<i64>>;
    /// See [`JobScheduleDueParams`].
    async fn job_schedule_due(&self, params: JobScheduleDueParams) -> Result<i64>;
    /// See [`JobRescueStuckParams`].
    async fn job_rescue_stuck(&self, params: JobRescueStuckParams<'_>) -> Result<Vec<i64>>;
    /// See [`JobReleaseOrphansParams`].
    async fn job_release_orphans(&self, params: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>>;
    /// See [`JobArchiveParams`].
    async fn job_archive(&self, params: JobArchiveParams) -> Result<i64>;
    /// See [`JobPruneParams`].
    async fn job_prune(&self, params: JobPruneParams) -> Result<i64>;
    /// See [`JobCancelManyParams`].
    async fn job_cancel_many(&self, params: JobCancelManyParams<'_>) -> Result<Vec<JobState>>;
    /// See [`JobRetryManyParams`].
    async fn job_retry_many(&self, params: JobRetryManyParams<'_>) -> Result<Retried>;
    /// See [`JobDeleteManyParams`].
    async fn job_delete_many(&self, params: JobDeleteManyParams<'_>) -> Result<i64>;

    // --- workflows (docs/design/workflows.md) ---

    /// See [`JobInsertWorkflowParams`]. In a transaction of its own.
    async fn job_insert_workflow(&self, params: JobInsertWorkflowParams<'_>) -> Result<InsertedWorkflow>;
    /// See [`JobBatchParams`]. In a transaction of its own.
    async fn job_batch(&self, params: JobBatchParams<'_>) -> Result<BatchChanged>;
    /// See [`JobSettleParams`].
    async fn job_settle(&self, params: JobSettleParams<'_>) -> Result<Settled>;
    /// See [`JobDependenciesParams`].
    async fn job_dependencies(&self, params: JobDependenciesParams) -> Result<Vec<Dependency>>;
    /// See [`WorkflowGetParams`].
    async fn workflow_get(&self, params: WorkflowGetParams) -> Result<Option<WorkflowInfo>>;
    /// See [`WorkflowPruneParams`].
    async fn workflow_prune(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned>;

    // --- jobs: reads ---

    /// See [`JobGetParams`].
    async fn job_get(&self, params: JobGetParams) -> Result<Option<JobRow>>;
    /// See [`JobListParams`].
    async fn job_list(&self, params: JobListParams<'_>) -> Result<Vec<JobRow>>;
    /// See [`JobListParams`]: the ids only.
    async fn job_list_ids(&self, params: JobListParams<'_>) -> Result<Vec<i64>>;
    /// See [`JobCountParams`].
    async fn job_count(&self, params: JobCountParams<'_>) -> Result<Count>;
    /// See [`JobCountByQueueAndStateParams`].
    async fn job_count_by_queue_and_state(
        &self,
        params: JobCountByQueueAndStateParams,
    ) -> Result<Vec<(String, JobState, i64)>>;
    /// See [`JobListWaitingParams`].
    async fn job_list_waiting(&self, params: JobListWaitingParams<'_>) -> Result<Vec<JobRow>>;
    /// See [`JobListCancelRequestedParams`].
    async fn job_list_cancel_requested(&self, params: JobListCancelRequestedParams<'_>) -> Result<Vec<i64>>;

    // --- queues ---

    /// See [`QueueSetPausedParams`].
    async fn queue_set_paused(&self, params: QueueSetPausedParams<'_>) -> Result<()>;
    /// See [`QueueIsPausedParams`].
    async fn queue_is_paused(&self, params: QueueIsPausedParams<'_>) -> Result<bool>;
    /// See [`QueueListPausedParams`].
    async fn queue_list_paused(&self, params: QueueListPausedParams) -> Result<Vec<String>>;
    /// See [`QueueListDepthsParams`].
    async fn queue_list_depths(&self, params: QueueListDepthsParams) -> Result<Vec<QueueDepth>>;
    /// See [`QueueSetConcurrencyParams`].
    async fn queue_set_concurrency(&self, params: QueueSetConcurrencyParams<'_>) -> Result<()>;
    /// See [`QueueSetLimitsParams`].
    async fn queue_set_limits(&self, params: QueueSetLimitsParams<'_>) -> Result<()>;
    /// See [`QueueSettingsParams`].
    async fn queue_settings(&self, params: QueueSettingsParams<'_>) -> Result<Vec<QueueSettings>>;
    /// See [`QueueLimitsUsageParams`].
    async fn queue_limits_usage(&self, params: QueueLimitsUsageParams<'_>) -> Result<LimitsUsage>;

    // --- nodes ---

    /// See [`NodeHoldParams`].
    async fn node_hold(&self, params: NodeHoldParams<'_>) -> Result<NodeHold>;
    /// See [`NodeHeartbeatParams`].
    async fn node_heartbeat(&self, params: NodeHeartbeatParams<'_>) -> Result<()>;
    /// See [`NodeDeleteParams`].
    async fn node_delete(&self, params: NodeDeleteParams<'_>) -> Result<()>;
    /// See [`NodeDeleteStaleParams`].
    async fn node_delete_stale(&self, params: NodeDeleteStaleParams) -> Result<i64>;
    /// See [`NodeListParams`].
    async fn node_list(&self, params: NodeListParams) -> Result<Vec<NodeRow>>;

    // --- leader ---

    /// See [`LeaderTryAcquireParams`].
    async fn leader_try_acquire(&self, params: LeaderTryAcquireParams<'_>) -> Result<bool>;
    /// See [`LeaderReleaseParams`].
    async fn leader_release(&self, params: LeaderReleaseParams<'_>) -> Result<()>;
    /// See [`LeaderGetParams`].
    async fn leader_get(&self, params: LeaderGetParams<'_>) -> Result<Option<String>>;

    // --- schedules ---

    /// See [`ScheduleSyncParams`].
    async fn schedule_sync(&self, params: ScheduleSyncParams<'_>) -> Result<i64>;
    /// See [`ScheduleFireDueParams`].
    async fn schedule_fire_due(&self, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>>;
    /// See [`ScheduleSetEnabledParams`].
    async fn schedule_set_enabled(&self, params: ScheduleSetEnabledParams<'_>) -> Result<bool>;
    /// See [`ScheduleRecordRunParams`].
    async fn schedule_record_run(&self, params: ScheduleRecordRunParams<'_>) -> Result<bool>;
    /// See [`ScheduleGetParams`].
    async fn schedule_get(&self, params: ScheduleGetParams<'_>) -> Result<Option<ScheduleRow>>;
    /// See [`ScheduleListParams`].
    async fn schedule_list(&self, params: ScheduleListParams) -> Result<Vec<ScheduleRow>>;

    // --- outcome counters ---

    /// See [`StatsRecordParams`].
    async fn stats_record(&self, params: StatsRecordParams<'_>) -> Result<()>;
    /// See [`StatsPruneParams`].
    async fn stats_prune(&self, params: StatsPruneParams) -> Result<i64>;
    /// See [`StatsThroughputParams`].
    async fn stats_throughput(&self, params: StatsThroughputParams) -> Result<Vec<Throughput>>;
    /// See [`StatsCompactParams`].
    async fn stats_compact(&self, params: StatsCompactParams) -> Result<i64>;
    /// See [`StatsKindsParams`].
    async fn stats_kinds(&self, params: StatsKindsParams) -> Result<Vec<KindStats>>;

    // --- the server ---

    /// See [`ServerStatusParams`].
    async fn server_status(&self, params: ServerStatusParams) -> Result<ServerStatus>;
}

/// A connection receiving [`Notification`]s.
#[async_trait]
pub trait Listener: Send {
    /// The next notification. An error means the connection was lost: ask the driver for
    /// a new listener (notifications may have been missed meanwhile).
    async fn next(&mut self) -> Result<Notification>;
}

/// What lends a job the driver it runs on: `jobs_core::JobContext`. Driver crates build
/// typed conveniences on it, as extension traits (`jobs_postgres::PgContext`:
/// `ctx.pool()`, `ctx.conn()`), so the engine names no backend's types.
pub trait HasDriver {
    /// The worker's driver; `None` for a context built without one (a unit test's).
    fn driver_ref(&self) -> Option<&dyn Driver>;
}
