//! Inline mode: inside [`inline`], enqueueing runs the job at once instead of inserting it.
//!
//! It plugs in through the seam, as an engine of its own: [`InlineDriver`] is a
//! [`Driver`] whose `job_insert_many` runs each job through an unstarted worker's own run
//! path and stores nothing, and [`inline`] makes every async enqueue of its task insert
//! through it (`enqueue::enqueue_through`). It has no table: every other operation is
//! unsupported.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use jobs_driver::*;

use crate::data::AppData;
use crate::enqueue::enqueue_through;
use crate::error::{Error, Result as CoreResult};
use crate::into_driver::IntoDriver;
use crate::registry::Registry;
use crate::worker::{Drained, Worker};

/// Runs `body` in inline mode: every async enqueue inside it (`J::enqueue`, `build(..)
/// .enqueue`, [`enqueue_many`](crate::enqueue_many)) runs the job right away, in this task,
/// through the worker's own run path (a panic or timeout is recorded as the failed
/// attempt, as a worker would), instead of inserting a row, and returns id 0. Jobs the
/// handlers enqueue run too. Returns `body`'s output and every run, in order. Enqueueing a
/// kind this binary does not register fails with [`Error::UnknownKind`].
///
/// Handlers get `db`'s pool for their own queries; they do not see the caller's
/// uncommitted writes (the job runs before the caller's transaction commits). Synchronous
/// enqueues (`enqueue_sync`) still insert.
pub async fn inline<F: std::future::Future>(
    db: impl IntoDriver,
    body: F,
) -> CoreResult<(F::Output, Vec<Drained>)> {
    inline_with(db, AppData::new(), body).await
}

/// [`inline`], the handlers given the application's values `data` (their `Data<T>`
/// parameters), as a worker built with [`WorkerBuilder::data`](crate::WorkerBuilder::data).
pub async fn inline_with<F: std::future::Future>(
    db: impl IntoDriver,
    data: AppData,
    body: F,
) -> CoreResult<(F::Output, Vec<Drained>)> {
    let driver = Arc::new(InlineDriver::new(db.into_driver(), Registry::from_inventory()?).with_data(data));
    let output = enqueue_through(driver.clone(), body).await;
    Ok((output, driver.take_runs()))
}

/// The inline engine: runs jobs at insert, through an unstarted worker per queue on the
/// real driver `inner` (whose pool the handlers get).
pub struct InlineDriver {
    inner: Arc<dyn Driver>,
    registry: Registry,
    data: AppData,
    workers: Mutex<HashMap<String, Arc<Worker>>>,
    runs: Mutex<Vec<Drained>>,
}

impl std::fmt::Debug for InlineDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineDriver").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl InlineDriver {
    /// An inline engine running the jobs of `registry`, their handlers on `inner`'s pool.
    pub fn new(inner: Arc<dyn Driver>, registry: Registry) -> InlineDriver {
        InlineDriver {
            inner,
            registry,
            data: AppData::new(),
            workers: Mutex::default(),
            runs: Mutex::default(),
        }
    }

    /// The same, its handlers given the application's values `data`.
    pub fn with_data(mut self, data: AppData) -> InlineDriver {
        self.data = data;
        self
    }

    /// Every run so far, in order, leaving none.
    pub fn take_runs(&self) -> Vec<Drained> {
        std::mem::take(&mut *self.runs.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The worker for `queue`, built on first use.
    fn worker(&self, queue: &str) -> CoreResult<Arc<Worker>> {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(worker) = workers.get(queue) {
            return Ok(worker.clone());
        }
        let worker = Arc::new(
            Worker::builder(self.inner.clone())
                .queue(queue, 1)
                .node_name("inline")
                .registry(self.registry.clone())
                .app_data(self.data.clone())
                .check_data_per_run()
                .without_maintenance()
                .listen(false)
                .build()?,
        );
        workers.insert(queue.to_owned(), worker.clone());
        Ok(worker)
    }

    async fn run(&self, row: &NewJob) -> CoreResult<Drained> {
        if self.registry.get(&row.kind).is_none() {
            return Err(Error::UnknownKind(row.kind.to_string()));
        }
        let worker = self.worker(&row.queue)?;
        worker
            .perform_unsaved(row)
            .await
            .ok_or_else(|| Error::Runtime(format!("no inline worker for queue `{}`", row.queue)))
    }

    fn unsupported<T>(&self, operation: &'static str) -> Result<T> {
        Err(DriverError::Unsupported { driver: self.name(), operation })
    }
}

/// Errors of the jobs' runs, carried through the driver's error type.
fn run_error(e: Error) -> DriverError {
    match e {
        Error::Database(e) => DriverError::Database(e),
        other => DriverError::Runtime(other.to_string()),
    }
}

#[async_trait]
impl Driver for InlineDriver {
    fn name(&self) -> &'static str {
        "inline"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn pool(&self) -> &(dyn Any + Send + Sync) {
        self.inner.pool()
    }

    async fn migrate(&self) -> Result<Vec<String>> {
        self.unsupported("migrate")
    }

    async fn listen(&self) -> Result<Option<Box<dyn Listener>>> {
        Ok(None)
    }

    /// Runs each job at once and records the run; every job "inserted" has id 0.
    async fn job_insert_many(&self, params: JobInsertManyParams<'_>) -> Result<Vec<Inserted>> {
        let mut inserted = Vec::with_capacity(params.jobs.len());
        for row in params.jobs {
            let drained = self.run(row).await.map_err(run_error)?;
            self.runs.lock().unwrap_or_else(|e| e.into_inner()).push(drained);
            inserted.push(Inserted { id: 0, existing: false });
        }
        Ok(inserted)
    }

    async fn job_insert_full_many(&self, _: JobInsertFullManyParams<'_>) -> Result<Vec<i64>> {
        self.unsupported("store a job")
    }
    async fn job_claim(&self, _: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>> {
        self.unsupported("claim jobs")
    }
    async fn job_complete_many(&self, _: JobCompleteManyParams<'_>) -> Result<Vec<i64>> {
        self.unsupported("complete jobs")
    }
    async fn job_schedule_due(&self, _: JobScheduleDueParams) -> Result<i64> {
        self.unsupported("schedule jobs")
    }
    async fn job_rescue_stuck(&self, _: JobRescueStuckParams<'_>) -> Result<Vec<i64>> {
        self.unsupported("rescue jobs")
    }
    async fn job_release_orphans(&self, _: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>> {
        self.unsupported("release jobs")
    }
    async fn job_archive(&self, _: JobArchiveParams) -> Result<i64> {
        self.unsupported("archive jobs")
    }
    async fn job_prune(&self, _: JobPruneParams) -> Result<i64> {
        self.unsupported("prune jobs")
    }
    async fn job_cancel_many(&self, _: JobCancelManyParams<'_>) -> Result<Vec<JobState>> {
        self.unsupported("cancel jobs")
    }
    async fn job_retry_many(&self, _: JobRetryManyParams<'_>) -> Result<Retried> {
        self.unsupported("retry jobs")
    }
    async fn job_delete_many(&self, _: JobDeleteManyParams<'_>) -> Result<i64> {
        self.unsupported("delete jobs")
    }
    async fn job_insert_workflow(&self, _: JobInsertWorkflowParams<'_>) -> Result<InsertedWorkflow> {
        self.unsupported("run workflows inline")
    }
    async fn job_batch(&self, _: JobBatchParams<'_>) -> Result<BatchChanged> {
        self.unsupported("run batches inline")
    }
    async fn job_settle(&self, _: JobSettleParams<'_>) -> Result<Settled> {
        self.unsupported("settle workflows")
    }
    async fn job_dependencies(&self, _: JobDependenciesParams) -> Result<Vec<Dependency>> {
        self.unsupported("read dependencies")
    }
    async fn workflow_get(&self, _: WorkflowGetParams) -> Result<Option<WorkflowInfo>> {
        self.unsupported("read workflows")
    }
    async fn workflow_prune(&self, _: WorkflowPruneParams) -> Result<WorkflowPruned> {
        self.unsupported("prune workflows")
    }
    async fn job_get(&self, _: JobGetParams) -> Result<Option<JobRow>> {
        self.unsupported("read jobs")
    }
    async fn job_list(&self, _: JobListParams<'_>) -> Result<Vec<JobRow>> {
        self.unsupported("list jobs")
    }
    async fn job_list_ids(&self, _: JobListParams<'_>) -> Result<Vec<i64>> {
        self.unsupported("list jobs")
    }
    async fn job_count(&self, _: JobCountParams<'_>) -> Result<Count> {
        self.unsupported("count jobs")
    }
    async fn job_count_by_queue_and_state(
        &self,
        _: JobCountByQueueAndStateParams,
    ) -> Result<Vec<(String, JobState, i64)>> {
        self.unsupported("count jobs")
    }
    async fn job_list_waiting(&self, _: JobListWaitingParams<'_>) -> Result<Vec<JobRow>> {
        self.unsupported("list jobs")
    }
    async fn job_list_cancel_requested(&self, _: JobListCancelRequestedParams<'_>) -> Result<Vec<i64>> {
        self.unsupported("list jobs")
    }
    async fn queue_set_paused(&self, _: QueueSetPausedParams<'_>) -> Result<()> {
        self.unsupported("pause queues")
    }
    async fn queue_is_paused(&self, _: QueueIsPausedParams<'_>) -> Result<bool> {
        Ok(false)
    }
    async fn queue_list_paused(&self, _: QueueListPausedParams) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
    async fn queue_list_depths(&self, _: QueueListDepthsParams) -> Result<Vec<QueueDepth>> {
        self.unsupported("list queues")
    }
    async fn queue_set_concurrency(&self, _: QueueSetConcurrencyParams<'_>) -> Result<()> {
        self.unsupported("store queue settings")
    }
    async fn queue_set_limits(&self, _: QueueSetLimitsParams<'_>) -> Result<()> {
        self.unsupported("store queue settings")
    }
    async fn queue_settings(&self, _: QueueSettingsParams<'_>) -> Result<Vec<QueueSettings>> {
        Ok(Vec::new())
    }
    async fn queue_limits_usage(&self, _: QueueLimitsUsageParams<'_>) -> Result<LimitsUsage> {
        Ok(LimitsUsage::default())
    }
    async fn node_hold(&self, _: NodeHoldParams<'_>) -> Result<NodeHold> {
        self.unsupported("hold node locks")
    }
    async fn node_heartbeat(&self, _: NodeHeartbeatParams<'_>) -> Result<()> {
        self.unsupported("record nodes")
    }
    async fn node_delete(&self, _: NodeDeleteParams<'_>) -> Result<()> {
        self.unsupported("record nodes")
    }
    async fn node_delete_stale(&self, _: NodeDeleteStaleParams) -> Result<i64> {
        self.unsupported("forget nodes")
    }
    async fn node_list(&self, _: NodeListParams) -> Result<Vec<NodeRow>> {
        self.unsupported("list nodes")
    }
    async fn leader_try_acquire(&self, _: LeaderTryAcquireParams<'_>) -> Result<bool> {
        self.unsupported("elect a leader")
    }
    async fn leader_release(&self, _: LeaderReleaseParams<'_>) -> Result<()> {
        self.unsupported("elect a leader")
    }
    async fn leader_get(&self, _: LeaderGetParams<'_>) -> Result<Option<String>> {
        self.unsupported("elect a leader")
    }
    async fn schedule_sync(&self, _: ScheduleSyncParams<'_>) -> Result<i64> {
        self.unsupported("store schedules")
    }
    async fn schedule_fire_due(&self, _: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>> {
        self.unsupported("fire schedules")
    }
    async fn schedule_set_enabled(&self, _: ScheduleSetEnabledParams<'_>) -> Result<bool> {
        self.unsupported("store schedules")
    }
    async fn schedule_record_run(&self, _: ScheduleRecordRunParams<'_>) -> Result<bool> {
        self.unsupported("store schedules")
    }
    async fn schedule_get(&self, _: ScheduleGetParams<'_>) -> Result<Option<ScheduleRow>> {
        self.unsupported("read schedules")
    }
    async fn schedule_list(&self, _: ScheduleListParams) -> Result<Vec<ScheduleRow>> {
        self.unsupported("read schedules")
    }
    async fn stats_record(&self, _: StatsRecordParams<'_>) -> Result<()> {
        self.unsupported("record outcome counts")
    }
    async fn stats_prune(&self, _: StatsPruneParams) -> Result<i64> {
        self.unsupported("prune outcome counts")
    }
    async fn stats_throughput(&self, _: StatsThroughputParams) -> Result<Vec<Throughput>> {
        self.unsupported("read outcome counts")
    }
    async fn stats_compact(&self, _: StatsCompactParams) -> Result<i64> {
        self.unsupported("compact stats")
    }
    async fn stats_kinds(&self, _: StatsKindsParams) -> Result<Vec<KindStats>> {
        self.unsupported("read stats")
    }

    async fn server_status(&self, _: ServerStatusParams) -> Result<ServerStatus> {
        Ok(ServerStatus { version: "inline".into(), major: None, read_only: false, replica_lag: None })
    }
}
