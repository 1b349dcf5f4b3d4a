//! Actions on jobs, one or many in one statement: cancel, retry, delete. Each runs in the
//! caller's transaction when the connection is in one (their notifications go out on
//! commit).

use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobState, Result};

use crate::channels::{available_channel, control_channel};

#[derive(QueryableByName)]
struct StateRow {
    #[diesel(sql_type = crate::schema::sql_types::JobState)]
    state: JobState,
}

// Both statements take an array of ids: one job or a whole selection run the same SQL. A
// running job is only marked; its node hears `{"cancel": id}` on the control channel.
const CANCEL: &str = concat!(
    "\
WITH target AS (
    UPDATE jobs
    SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled'::job_state END,
        finalized_at = CASE WHEN state = 'running' THEN NULL ELSE now() END,
        cancel_requested_at = now()
    WHERE id = ANY ($1) AND state IN ('available', 'scheduled', 'running', 'retryable')
    RETURNING id, state
), told AS (
    SELECT pg_notify('",
    control_channel!(),
    "', json_build_object('cancel', id)::text) FROM target WHERE state = 'running'
)
SELECT state FROM target, (SELECT count(*) FROM told) AS t"
);

const RETRY: &str = concat!(
    "\
WITH target AS (
    UPDATE jobs
    SET state = 'available', scheduled_at = now(), finalized_at = NULL, cancel_requested_at = NULL,
        max_attempts = GREATEST(max_attempts, attempt + 1)
    WHERE id = ANY ($1) AND state <> 'running'
    RETURNING queue, state
), woken AS (SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM target) AS q)
SELECT state FROM target, (SELECT count(*) FROM woken) AS w"
);

// A retried job in the archive moves back to `jobs`, available now. (Run after `RETRY`,
// as its own statement: a job the archiver moved while `RETRY` waited on its row is seen
// here, in a later snapshot.)
const RETRY_ARCHIVED: &str = concat!(
    "\
WITH back AS (
    DELETE FROM jobs_archive WHERE id = ANY ($1)
    RETURNING ",
    super::archive::job_columns!(),
    "
), target AS (
    INSERT INTO jobs (",
    super::archive::job_columns!(),
    ")
    SELECT id, 'available', queue, kind, args, meta, tags, priority, attempt, GREATEST(max_attempts, attempt + 1),
           timeout_ms, created_at, now(), attempted_at, NULL, attempted_by, errors, result, NULL,
           unique_key, unique_states
    FROM back
    RETURNING queue, state
), woken AS (SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM target) AS q)
SELECT state FROM target, (SELECT count(*) FROM woken) AS w"
);

async fn states_after<C>(conn: &mut C, sql: &'static str, ids: &[i64]) -> Result<Vec<JobState>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<StateRow> = diesel::sql_query(sql).bind::<Array<BigInt>, _>(ids).load(conn).await?;
    Ok(rows.into_iter().map(|r| r.state).collect())
}

/// Cancels the jobs of `ids` that are not finished: one that is not running at once
/// (`cancelled`); a running one is marked and its node told on commit (`running`).
/// Returns the state each changed job is in.
pub async fn cancel_many<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    states_after(conn, CANCEL, ids).await
}

/// Makes the jobs of `ids` that are not running available now, granting one more attempt
/// to those that used them all; archived ones move back to `jobs`. Returns how many
/// changed.
pub async fn retry_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let hot = states_after(conn, RETRY, ids).await?.len();
    let archived = states_after(conn, RETRY_ARCHIVED, ids).await?.len();
    Ok((hot + archived) as i64)
}

/// Deletes the jobs of `ids` that are not running (cancel them first), in `jobs` and then
/// in the archive (a later snapshot: a job archived meanwhile is found there). Returns
/// how many went.
pub async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let mut n = 0;
    for sql in [
        "DELETE FROM jobs WHERE id = ANY ($1) AND state <> 'running'",
        "DELETE FROM jobs_archive WHERE id = ANY ($1)",
    ] {
        n += diesel::sql_query(sql).bind::<Array<BigInt>, _>(ids).execute(conn).await?;
    }
    Ok(n as i64)
}
