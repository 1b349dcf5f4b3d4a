//! Actions on jobs (cancel, retry, delete: one, many, or all matching a filter), and the
//! control channel that carries cancellations and pauses to every node.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::error::Result;
use crate::state::JobState;

/// The NOTIFY channel for control messages: `{"cancel": id}`, `{"queue": q, "paused": b}`.
pub const CONTROL_CHANNEL: &str = "jobs_control";

/// The NOTIFY channel on which inserts and the scheduler announce available jobs; the
/// payload is the queue name.
pub const AVAILABLE_CHANNEL: &str = "jobs_available";

#[derive(QueryableByName)]
struct StateRow {
    #[diesel(sql_type = crate::schema::sql_types::JobState)]
    state: JobState,
}

// Both statements take an array of ids: one job or a whole selection run the same SQL.
const CANCEL: &str = "\
WITH target AS (
    UPDATE jobs
    SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled'::job_state END,
        finalized_at = CASE WHEN state = 'running' THEN NULL ELSE now() END,
        cancel_requested_at = now()
    WHERE id = ANY ($1) AND state IN ('available', 'scheduled', 'running', 'retryable')
    RETURNING id, state
), told AS (
    SELECT pg_notify($2, json_build_object('cancel', id)::text) FROM target WHERE state = 'running'
)
SELECT state FROM target, (SELECT count(*) FROM told) AS t";

const RETRY: &str = "\
WITH target AS (
    UPDATE jobs
    SET state = 'available', scheduled_at = now(), finalized_at = NULL, cancel_requested_at = NULL,
        max_attempts = GREATEST(max_attempts, attempt + 1)
    WHERE id = ANY ($1) AND state <> 'running'
    RETURNING queue, state
), woken AS (SELECT pg_notify($2, queue) FROM (SELECT DISTINCT queue FROM target) AS q)
SELECT state FROM target, (SELECT count(*) FROM woken) AS w";

async fn run_on<C>(conn: &mut C, sql: &'static str, ids: &[i64], channel: &str) -> Result<Vec<JobState>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let rows: Vec<StateRow> = diesel::sql_query(sql)
        .bind::<diesel::sql_types::Array<BigInt>, _>(ids)
        .bind::<Text, _>(channel)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.state).collect())
}

/// Cancels job `id`. A job that is not running is cancelled at once (`Cancelled`); a
/// running one is marked and its node told over NOTIFY on commit, so its context is
/// cancelled and it ends cancelled (`Running`). `None` when the job does not exist or is
/// already finished.
pub async fn cancel<C>(conn: &mut C, id: i64) -> Result<Option<JobState>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(run_on(conn, CANCEL, &[id], CONTROL_CHANNEL).await?.into_iter().next())
}

/// [`cancel`] for many jobs in one statement. Returns how many were cancelled or told to
/// stop.
pub async fn cancel_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(run_on(conn, CANCEL, ids, CONTROL_CHANNEL).await?.len() as i64)
}

/// Makes job `id` available to run now (from any state but running), granting one more
/// attempt if it had used them all. Returns whether it was found and not running.
pub async fn retry<C>(conn: &mut C, id: i64) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(retry_many(conn, &[id]).await? > 0)
}

/// [`retry`] for many jobs in one statement. Returns how many were made available.
pub async fn retry_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(run_on(conn, RETRY, ids, AVAILABLE_CHANNEL).await?.len() as i64)
}

/// Deletes job `id` unless it is running (cancel it first). Returns whether a row went.
pub async fn delete<C>(conn: &mut C, id: i64) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(delete_many(conn, &[id]).await? > 0)
}

/// [`delete`] for many jobs in one statement (running ones are kept). Returns how many went.
pub async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let n = diesel::sql_query("DELETE FROM jobs WHERE id = ANY ($1) AND state <> 'running'")
        .bind::<diesel::sql_types::Array<BigInt>, _>(ids)
        .execute(conn)
        .await?;
    Ok(n as i64)
}

/// What an operator can do to jobs (dashboard buttons, CLI commands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Make available now ([`retry_many`]).
    Retry,
    /// Cancel, or ask a running job to stop ([`cancel_many`]).
    Cancel,
    /// Delete (running jobs are kept; [`delete_many`]).
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

    /// Applies the action to `ids` in one statement. Returns how many jobs it changed.
    pub async fn apply<C>(self, conn: &mut C, ids: &[i64]) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
    {
        match self {
            Action::Retry => retry_many(conn, ids).await,
            Action::Cancel => cancel_many(conn, ids).await,
            Action::Delete => delete_many(conn, ids).await,
        }
    }

    /// Applies the action to every job matching `filter`, newest first, `batch` jobs per
    /// statement (each its own transaction, so a large filter never holds long locks).
    /// Returns how many jobs it changed.
    pub async fn apply_to_matching<C>(
        self,
        conn: &mut C,
        filter: &super::dashboard::JobFilter,
        batch: i64,
    ) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
    {
        let mut total = 0;
        let mut before = None;
        loop {
            let ids = super::dashboard::matching_ids(conn, filter, before, batch.max(1)).await?;
            let Some(&last) = ids.last() else { break };
            total += self.apply(conn, &ids).await?;
            if (ids.len() as i64) < batch.max(1) {
                break;
            }
            before = Some(last);
        }
        Ok(total)
    }
}
