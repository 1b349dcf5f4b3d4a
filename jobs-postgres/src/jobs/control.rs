//! Actions on jobs, one or many at once: cancel, retry, delete. Each runs in the
//! caller's transaction when the connection is in one (their notifications go out on
//! commit).

use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobState, Result};

use crate::channels::{available_channel, control_channel};
use crate::rows::Count;

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

// Retry and delete act on `jobs` first, then on the archive, each in a statement of its
// own. The first locks the rows of `ids` it finds in `jobs` (`found`), whatever their
// state, and says which it found: the second touches only the others. A job running when
// the first looked is thus never retried or deleted from the archive after it finished
// there in between; a job the archiver moved while the first waited on its row is not
// found in `jobs`, and the second, in a later snapshot, finds it in the archive.

/// `found`: the rows of `ids` ($1) in `jobs`, locked; `target`: the action, returning the
/// `id`s it changed; then `woken` when given (it must be read to run). The statement's rows:
/// each found id and whether it changed.
macro_rules! hot_action {
    ($target:expr) => {
        concat!(
            "WITH found AS (SELECT id FROM jobs WHERE id = ANY ($1) FOR UPDATE), target AS (",
            $target,
            ")\nSELECT found.id, target.id IS NOT NULL AS changed FROM found LEFT JOIN target USING (id)"
        )
    };
    ($target:expr, woken: $woken:expr) => {
        concat!(
            "WITH found AS (SELECT id FROM jobs WHERE id = ANY ($1) FOR UPDATE), target AS (",
            $target,
            "), woken AS (",
            $woken,
            ")\nSELECT found.id, target.id IS NOT NULL AS changed
FROM found LEFT JOIN target USING (id), (SELECT count(*) FROM woken) AS w"
        )
    };
}

const RETRY: &str = hot_action!(
    "
    UPDATE jobs
    SET state = 'available', scheduled_at = now(), finalized_at = NULL, cancel_requested_at = NULL,
        max_attempts = GREATEST(max_attempts, attempt + 1)
    WHERE id IN (SELECT id FROM found) AND state <> 'running'
    RETURNING id, queue",
    woken: concat!(
        "SELECT pg_notify('",
        available_channel!(),
        "', queue) FROM (SELECT DISTINCT queue FROM target) AS q"
    )
);

const DELETE: &str =
    hot_action!("DELETE FROM jobs WHERE id IN (SELECT id FROM found) AND state <> 'running' RETURNING id");

// The archived jobs of $1 move back to `jobs`, available now.
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
    SELECT id, 'available', queue, kind, args, meta, tags, priority, attempt,
           GREATEST(max_attempts, attempt + 1), timeout_ms, created_at, now(), attempted_at, NULL, attempted_by, errors, result, NULL,
           unique_key, unique_states
    FROM back
    RETURNING queue
), woken AS (SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM target) AS q)
SELECT count(*) AS n FROM target, (SELECT count(*) FROM woken) AS w"
);

const DELETE_ARCHIVED: &str =
    "WITH gone AS (DELETE FROM jobs_archive WHERE id = ANY ($1) RETURNING 1) SELECT count(*) AS n FROM gone";

#[derive(QueryableByName)]
struct Found {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    changed: bool,
}

/// Runs `hot` on `ids` in `jobs`, then `archived` on those it did not find there; returns
/// how many jobs changed.
async fn hot_then_archived<C>(
    conn: &mut C,
    hot: &'static str,
    archived: &'static str,
    ids: &[i64],
) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let found: Vec<Found> = diesel::sql_query(hot).bind::<Array<BigInt>, _>(ids).load(conn).await?;
    let changed = found.iter().filter(|f| f.changed).count() as i64;
    let rest: Vec<i64> = ids.iter().copied().filter(|id| !found.iter().any(|f| f.id == *id)).collect();
    if rest.is_empty() {
        return Ok(changed);
    }
    let row: Count = diesel::sql_query(archived).bind::<Array<BigInt>, _>(&rest).get_result(conn).await?;
    Ok(changed + row.n)
}

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
    hot_then_archived(conn, RETRY, RETRY_ARCHIVED, ids).await
}

/// Deletes the jobs of `ids` that are not running (cancel them first), in `jobs` or in the
/// archive. Returns how many went.
pub async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    hot_then_archived(conn, DELETE, DELETE_ARCHIVED, ids).await
}
