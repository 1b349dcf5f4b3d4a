//! Running a worker's queues inline until nothing is due: [`Worker::drain`], for tests
//! (and one-off scripts) that want every job done before they look.

use jobs_driver::{
    ClaimedJob, Completion, JobClaimParams, JobCompleteManyParams, JobScheduleDueParams, JobState,
    NodeDeleteParams, QueueListPausedParams,
};

use super::executor;
use super::heartbeat;
use super::panic_capture;
use super::running_jobs::RunningJob;
use super::startup::Worker;
use crate::error::Result;

/// The most claim rounds one drain makes (a job that keeps snoozing for zero seconds would
/// otherwise keep it going forever).
const MAX_ROUNDS: usize = 1_000;

/// One attempt a drain ran, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Drained {
    /// The job.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// The attempt that ran.
    pub attempt: i32,
    /// The state it went to: completed, retryable, discarded, cancelled, or scheduled
    /// (snoozed).
    pub state: JobState,
    /// The result, when it completed with one.
    pub result: Option<serde_json::Value>,
    /// The error entry recorded for the attempt, when it failed.
    pub error: Option<serde_json::Value>,
}

impl Drained {
    fn from_run(job: ClaimedJob, c: &Completion) -> Drained {
        Drained {
            id: job.id,
            kind: job.kind,
            queue: job.queue,
            attempt: job.attempt,
            state: c.state,
            result: c.result.as_deref().and_then(|r| serde_json::from_str(r).ok()),
            error: c.error.as_deref().and_then(|e| serde_json::from_str(e).ok()),
        }
    }
}

impl Worker {
    /// Runs, one at a time and in this task, every job of the worker's queues that is due
    /// now (scheduled and retryable jobs whose time has come included), writing each
    /// outcome as the worker would, until none is left. Jobs the handlers enqueue are run
    /// too if due. Returns what ran, in order. Retries and snoozes scheduled for later are
    /// left for later.
    ///
    /// The worker need not be started (and should not be: a started worker claims the
    /// same jobs). Paused queues are skipped.
    pub async fn drain(&self) -> Result<Vec<Drained>> {
        panic_capture::install_hook();
        let shared = &self.shared;
        heartbeat::beat(shared, true).await?;
        let mut queues: Vec<_> = shared.queues.values().cloned().collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        let mut drained = Vec::new();
        for _ in 0..MAX_ROUNDS {
            // Once per round: due jobs become available, pause flags are read.
            let driver = &shared.driver;
            driver
                .job_schedule_due(JobScheduleDueParams { limit: 10_000, now: shared.clock.db_now() })
                .await?;
            let paused = driver.queue_list_paused(QueueListPausedParams {}).await?;
            let mut ran = false;
            for queue in queues.iter().filter(|q| !paused.iter().any(|p| *p == *q.name)) {
                let claim = JobClaimParams {
                    queue: &queue.name,
                    limit: 1_000,
                    node: &shared.node,
                    now: shared.clock.db_now(),
                    recurring_size: false,
                    // A drain runs everything due, as a test wants; cluster-wide limits
                    // (rate, global) are for the workers.
                    limited: false,
                    declared: Default::default(),
                    ended: &[],
                };
                let jobs = driver.job_claim(claim).await?;
                if jobs.is_empty() {
                    continue;
                }
                ran = true;
                let mut completions = Vec::with_capacity(jobs.len());
                for job in &jobs {
                    completions.push(executor::execute(shared, queue, job, &RunningJob::new()).await);
                }
                let written = JobCompleteManyParams { completions: &completions, now: shared.clock.db_now() };
                driver.job_complete_many(written).await?;
                drained.extend(jobs.into_iter().zip(completions).map(|(job, c)| Drained::from_run(job, &c)));
            }
            if !ran {
                break;
            }
        }
        shared.driver.node_delete(NodeDeleteParams { node: &shared.node }).await?;
        Ok(drained)
    }
}

impl Worker {
    /// Runs `row` once, in this task, through the same path as a claimed job (decoding,
    /// timeout, panics caught, outcome to state), without it ever being stored: inline
    /// mode's runner. `None` when the worker does not run `row`'s queue.
    #[cfg(feature = "testing")]
    pub(crate) async fn perform_unsaved(&self, row: &jobs_driver::NewJob) -> Option<Drained> {
        let queue = self.shared.queues.get(&*row.queue)?;
        let now = chrono::Utc::now();
        let job = ClaimedJob {
            id: 0,
            kind: row.kind.to_string(),
            queue: row.queue.to_string(),
            args: row.args.clone(),
            meta: row.meta.to_string(),
            tags: row.tags.clone(),
            priority: row.priority,
            attempt: 1,
            max_attempts: row.max_attempts,
            timeout_ms: row.timeout_ms,
            created_at: now,
            scheduled_at: now,
            attempted_at: now,
            workflow_id: None,
        };
        let completion = executor::execute(&self.shared, queue, &job, &RunningJob::new()).await;
        Some(Drained::from_run(job, &completion))
    }
}
