//! What people and programs do to jobs and queues: retry, cancel or delete jobs (one, many,
//! or all matching a filter) through the driver — the dashboard's buttons and the CLI's
//! commands — and the same actions on a connection of the application's own, inside its
//! transaction; pause a queue, or set its limits for the whole cluster.

use diesel_async::AsyncConnectionCore;
use jobs_driver::ConnectionDriver;
use jobs_driver::{
    Driver, JobCancelManyParams, JobDeleteManyParams, JobFilter, JobListParams, JobRetryManyParams, JobState,
    QueueSetLimitsParams,
};

use crate::backend::JobsBackend;
use crate::error::Result;
use crate::into_driver::IntoDriver;

/// Cancels job `id` in the caller's transaction. A job that is not running is cancelled at
/// once (`Cancelled`); a running one is marked and its node told on commit, so that its
/// context is cancelled and it ends cancelled (`Running`). `None` when the job does not
/// exist or is already finished.
pub async fn cancel_job<C>(conn: &mut C, id: i64) -> Result<Option<JobState>>
where
    C: AsyncConnectionCore + Send,
    C::Backend: JobsBackend,
{
    Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::cancel(conn, &[id])
        .await?
        .into_iter()
        .next())
}

/// Makes job `id` available to run now (from any state but running and pending: a pending
/// job waits for its dependencies), in the caller's transaction, granting one more attempt
/// if it had used them all. Returns whether it was found and changed; [`Error::UniqueKeyHeld`](crate::Error::UniqueKeyHeld) when
/// another job holds its uniqueness key (the job is left as it is).
pub async fn retry_job<C>(conn: &mut C, id: i64) -> Result<bool>
where
    C: diesel_async::AsyncConnection + Send,
    C::Backend: JobsBackend,
{
    let retried = <<C::Backend as JobsBackend>::Driver as ConnectionDriver>::retry(conn, &[id]).await?;
    if retried.key_held.contains(&id) {
        return Err(crate::error::Error::UniqueKeyHeld { id });
    }
    Ok(retried.retried > 0)
}

/// Deletes job `id` unless it is running (cancel it first), in the caller's transaction.
/// Returns whether a row went.
pub async fn delete_job<C>(conn: &mut C, id: i64) -> Result<bool>
where
    C: AsyncConnectionCore + Send,
    C::Backend: JobsBackend,
{
    Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::delete(conn, &[id]).await? > 0)
}

/// Pauses (`true`) or resumes (`false`) `queue` on every node, in the caller's
/// transaction: the flag is stored, and the nodes are told when it commits.
pub async fn set_queue_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
where
    C: AsyncConnectionCore + Send,
    C::Backend: JobsBackend,
{
    crate::enqueue::validate_queue(queue)?;
    Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::set_paused(conn, queue, paused).await?)
}

/// A queue's limits for the whole cluster, which every node's claims obey together (see
/// [`set_queue_limits`]). The default is none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLimits {
    /// At most this many of the queue's jobs running at once, across every node.
    pub global_limit: Option<u32>,
    /// At most this many of the queue's jobs running at once per partition key, across
    /// every node (keys served in turn; see `JobOptions::partition_by`).
    pub per_key_limit: Option<u32>,
    /// At most so many of the queue's jobs started per period, across every node.
    pub rate: Option<jobs_driver::RateLimit>,
    /// At most so many of the queue's jobs started per period per partition key, across
    /// every node (the unkeyed jobs count as one key).
    pub per_key_rate: Option<jobs_driver::RateLimit>,
}

/// Sets `queue`'s limits for the whole cluster (none: removes them). Every worker reads
/// them at its next poll (`poll_interval`, 1 s by default) and from then on claims the
/// queue's jobs under them, one node's claim after another's, buffering none ahead:
/// at most `global_limit` of them run at once, at most `per_key_limit` per partition key
/// (keys served in turn), at most `rate.allowed` start in any
/// stretch of `rate.period_secs` (counted in twentieths of the period, so a queue kept
/// busy starts about 95 % of the rate, never more), and at most `per_key_rate.allowed`
/// per partition key in any stretch of its period (counted the same way, per key). Jobs
/// running beyond a lowered limit finish.
///
/// ```no_run
/// # async fn demo(pool: jobs_core::postgres::Pool) -> jobs_core::Result<()> {
/// use jobs_core::driver::RateLimit;
/// use jobs_core::{QueueLimits, set_queue_limits};
///
/// // The payment provider allows 100 calls a minute, from 3 connections at most.
/// let rate = Some(RateLimit { allowed: 100, period_secs: 60 });
/// let limits = QueueLimits { global_limit: Some(3), rate, ..QueueLimits::default() };
/// set_queue_limits(&pool, "payments", limits).await?;
/// # Ok(()) }
/// ```
pub async fn set_queue_limits(driver: impl IntoDriver, queue: &str, limits: QueueLimits) -> Result<()> {
    crate::enqueue::validate_queue(queue)?;
    let global_limit = match limits.global_limit {
        Some(n) => {
            jobs_driver::validation::validate_global_limit(i64::from(n))?;
            i32::try_from(n).ok()
        }
        None => None,
    };
    let per_key_limit = match limits.per_key_limit {
        Some(n) => {
            jobs_driver::validation::validate_per_key_limit(i64::from(n))?;
            i32::try_from(n).ok()
        }
        None => None,
    };
    let valid_rate = |rate: Option<jobs_driver::RateLimit>| match rate {
        Some(r) => {
            jobs_driver::validation::validate_rate_limit(i64::from(r.allowed), i64::from(r.period_secs))
                .map(Some)
        }
        None => Ok(None),
    };
    let rate = valid_rate(limits.rate)?;
    let per_key_rate = valid_rate(limits.per_key_rate)?;
    let driver = driver.into_driver();
    let params = QueueSetLimitsParams { queue, global_limit, per_key_limit, rate, per_key_rate };
    Ok(driver.queue_set_limits(params).await?)
}

/// What an [`Action`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// How many jobs it changed.
    pub changed: i64,
    /// The jobs a retry left as they were because another job holds their uniqueness key
    /// (a newer copy waits or runs): retrying them would break the key's uniqueness.
    pub key_held: Vec<i64>,
}

impl Applied {
    /// What a report of the action adds for the jobs it left (empty when none):
    /// `; 2 not retried: another job holds their uniqueness key (jobs 4, 9)`.
    pub fn held_note(&self) -> String {
        if self.key_held.is_empty() {
            return String::new();
        }
        let shown: Vec<String> = self.key_held.iter().take(10).map(i64::to_string).collect();
        let more = if self.key_held.len() > 10 { ", …" } else { "" };
        format!(
            "; {} not retried: another job holds their uniqueness key (jobs {}{more})",
            self.key_held.len(),
            shown.join(", ")
        )
    }
}

/// What an operator can do to jobs (dashboard buttons, CLI commands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Make available now (`job_retry_many`).
    Retry,
    /// Cancel, or ask a running job to stop (`job_cancel_many`).
    Cancel,
    /// Delete (running jobs are kept; `job_delete_many`).
    Delete,
}

impl Action {
    /// `retry` (or `run`, for a scheduled job), `cancel`, `delete`.
    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "retry" | "run" => Some(Action::Retry),
            "cancel" => Some(Action::Cancel),
            "delete" => Some(Action::Delete),
            _ => None,
        }
    }

    /// The verb: `retry`, `cancel`, `delete`.
    pub fn verb(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Cancel => "cancel",
            Action::Delete => "delete",
        }
    }

    /// The past participle: `retried`, `cancelled`, `deleted`.
    pub fn past(self) -> &'static str {
        match self {
            Action::Retry => "retried",
            Action::Cancel => "cancelled",
            Action::Delete => "deleted",
        }
    }

    /// Applies the action to `ids` in one statement. Returns how many jobs it changed, and
    /// those a retry left because their uniqueness key is held.
    pub async fn apply(self, driver: &dyn Driver, ids: &[i64]) -> Result<Applied> {
        Ok(match self {
            Action::Retry => {
                let retried = driver.job_retry_many(JobRetryManyParams { ids }).await?;
                Applied { changed: retried.retried, key_held: retried.key_held }
            }
            Action::Cancel => Applied {
                changed: driver.job_cancel_many(JobCancelManyParams { ids }).await?.len() as i64,
                key_held: Vec::new(),
            },
            Action::Delete => Applied {
                changed: driver.job_delete_many(JobDeleteManyParams { ids }).await?,
                key_held: Vec::new(),
            },
        })
    }

    /// Applies the action to every job matching `filter`, newest first, `batch` jobs per
    /// statement (each its own transaction, so a large filter never holds long locks).
    /// Returns how many jobs it changed, and those a retry left (see [`Applied`]): a job
    /// whose key is held never stops the others.
    ///
    /// A retry of a workflow's members (`filter.workflow`) reads their ids in pages and
    /// retries them all in one call: retried a batch at a time, a step whose dependency
    /// is in a later batch would be due, and run, with its dependency still completed
    /// from before, and its dependency's rerun would then not run it again.
    pub async fn apply_to_matching(
        self,
        driver: &dyn Driver,
        filter: &JobFilter,
        batch: i64,
    ) -> Result<Applied> {
        self.apply_to_matching_through(driver, filter, None, batch).await
    }

    /// [`apply_to_matching`](Self::apply_to_matching), pinned to the jobs with an id at
    /// most `through` (when given): what a confirmation showed, without the jobs enqueued
    /// since. Take `through` from [`newest_matching`](Self::newest_matching) when the
    /// confirmation is shown.
    pub async fn apply_to_matching_through(
        self,
        driver: &dyn Driver,
        filter: &JobFilter,
        through: Option<i64>,
        batch: i64,
    ) -> Result<Applied> {
        let batch = batch.max(1);
        let mut total = Applied::default();
        // Walked newest first whatever order the filter was listed in: the pin is an
        // upper bound.
        let newest_first = JobFilter { order: jobs_driver::JobOrder::NewestFirst, ..filter.clone() };
        let filter = &newest_first;
        let whole = self == Action::Retry && filter.workflow.is_some();
        let mut gathered = Vec::new();
        let mut before = through.map(|id| id.saturating_add(1));
        loop {
            let ids = driver.job_list_ids(JobListParams { filter, before, limit: batch }).await?;
            let Some(&last) = ids.last() else { break };
            let full = ids.len() as i64 >= batch;
            if whole {
                gathered.extend(ids);
            } else {
                let applied = self.apply(driver, &ids).await?;
                total.changed += applied.changed;
                total.key_held.extend(applied.key_held);
            }
            if !full {
                break;
            }
            before = Some(last);
        }
        if !gathered.is_empty() {
            total = self.apply(driver, &gathered).await?;
        }
        Ok(total)
    }

    /// The newest job matching `filter` now (the pin of
    /// [`apply_to_matching_through`](Self::apply_to_matching_through)), `None` when none does.
    pub async fn newest_matching(driver: &dyn Driver, filter: &JobFilter) -> Result<Option<i64>> {
        let filter = &JobFilter { order: jobs_driver::JobOrder::NewestFirst, ..filter.clone() };
        Ok(driver.job_list_ids(JobListParams { filter, before: None, limit: 1 }).await?.first().copied())
    }
}
