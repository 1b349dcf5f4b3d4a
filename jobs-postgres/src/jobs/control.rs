//! Actions on jobs, one or many at once: cancel, retry, delete. Each runs in the
//! caller's transaction when the connection is in one (their notifications go out on
//! commit).

use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobState, Result, Retried};

use crate::notifications::{available_channel, control_channel};

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
    WHERE id = ANY ($1) AND state IN ('pending', 'available', 'scheduled', 'running', 'retryable')
    RETURNING id, state
), told AS (
    SELECT pg_notify('",
    control_channel!(),
    "', json_build_object('cancel', id)::text) FROM target WHERE state = 'running'
)
SELECT state FROM target, (SELECT count(*) FROM told) AS t"
);

// Retry and delete act on `jobs` first, then on the archive, each in a statement of its
// own. The first says which of `ids` it saw in `jobs` (`seen`, the statement's snapshot,
// no lock) and locks the ones not running (`found`; running jobs are left unlocked, so
// that their completions never wait on an action, nor deadlock with it). The second
// touches only the ids not seen in `jobs`, and those seen finished there that had left by
// the time of the lock (the archiver moved them; the second statement, in a later
// snapshot, finds them in the archive). A job seen running is never brought back from the
// archive, even if it finished in between.

/// `seen` and `found` (above) of `ids` ($1); `blocked`: those of `found` the action must
/// leave (their ids); `target`: the action on `found`, returning the `id`s it changed; then
/// `woken` when given (it must be read to run). The statement's rows: each seen id,
/// whether it left for the archive meanwhile (`gone`), whether it changed, and whether it
/// was blocked (`held`).
macro_rules! hot_action {
    (@read $woken:expr) => {
        ", (SELECT count(*) FROM woken) AS w"
    };
    ($target:expr, blocked: $blocked:expr $(, woken: $woken:expr)?) => {
        concat!(
            "WITH seen AS (SELECT id, state FROM jobs WHERE id = ANY ($1)),
found AS (SELECT id FROM jobs WHERE id = ANY ($1) AND state <> 'running' ORDER BY id FOR UPDATE),
blocked AS (",
            $blocked,
            "),
target AS (",
            $target,
            ")",
            $(", woken AS (", $woken, ")",)?
            "
SELECT seen.id, seen.state IN ('completed', 'discarded', 'cancelled') AND found.id IS NULL AS gone,
       target.id IS NOT NULL AS changed, blocked.id IS NOT NULL AS held
FROM seen LEFT JOIN found USING (id) LEFT JOIN target USING (id) LEFT JOIN blocked USING (id)",
            $(hot_action!(@read $woken),)?
        )
    };
}

// A job whose key another job holds, or an earlier job of the call takes (both unique when
// available), stays as it is: the unique index never fails the call.
const RETRY: &str = hot_action!(
    "
    UPDATE jobs
    SET state = CASE WHEN waiting_on > 0 OR failed_on > 0 THEN 'pending'::job_state ELSE 'available' END,
        scheduled_at = now(), finalized_at = NULL, cancel_requested_at = NULL,
        max_attempts = GREATEST(max_attempts, attempt + 1)
    WHERE id IN (SELECT id FROM found) AND id NOT IN (SELECT id FROM blocked) AND state NOT IN ('running', 'pending')
    RETURNING id, queue",
    blocked: concat!(
        "SELECT j.id FROM jobs j WHERE j.id IN (SELECT id FROM found) AND j.state <> 'pending' AND (",
        key_held_by_another!("j"),
        " OR (j.unique_key IS NOT NULL AND 'available' = ANY (j.unique_states)
             AND EXISTS (SELECT 1 FROM jobs d WHERE d.id IN (SELECT id FROM found) AND d.id < j.id
                         AND d.state <> 'pending'
                         AND d.unique_key = j.unique_key AND 'available' = ANY (d.unique_states))))"
    ),
    woken: concat!(
        "SELECT pg_notify('",
        available_channel!(),
        "', queue) FROM (SELECT DISTINCT queue FROM target) AS q"
    )
);

const DELETE: &str = hot_action!(
    "DELETE FROM jobs WHERE id IN (SELECT id FROM found) AND state <> 'running' RETURNING id",
    blocked: "SELECT NULL::int8 AS id WHERE false"
);

// The archived jobs of $1 move back to `jobs`, available now, unless their key is held in
// `jobs` or an earlier archived job of the call takes it.
const RETRY_ARCHIVED: &str = concat!(
    "\
WITH candidates AS (
    SELECT a.id,
           (a.unique_key IS NOT NULL AND 'available' = ANY (a.unique_states)
            AND (EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = a.unique_key AND o.unique_key IS NOT NULL
                                               AND o.state = ANY (o.unique_states))
                 OR EXISTS (SELECT 1 FROM jobs_archive d WHERE d.id = ANY ($1) AND d.id < a.id
                            AND d.unique_key = a.unique_key AND 'available' = ANY (d.unique_states)))) AS held
    FROM jobs_archive a WHERE a.id = ANY ($1)
), back AS (
    DELETE FROM jobs_archive WHERE id IN (SELECT id FROM candidates WHERE NOT held)
    RETURNING ",
    super::archive::job_columns!(),
    "
), target AS (
    INSERT INTO jobs (",
    super::archive::job_columns!(),
    ")
    SELECT id, CASE WHEN waiting_on > 0 OR failed_on > 0 THEN 'pending'::job_state ELSE 'available' END,
           queue, kind, args, meta, tags, priority, attempt,
           GREATEST(max_attempts, attempt + 1), timeout_ms, created_at, now(), attempted_at, NULL, attempted_by, errors, result, NULL,
           unique_key, unique_states, workflow_id, waiting_on, failed_on
    FROM back
    RETURNING queue
), woken AS (SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM target) AS q)
SELECT count(*) AS n, ARRAY(SELECT id FROM candidates WHERE held ORDER BY id) AS held
FROM target, (SELECT count(*) FROM woken) AS w"
);

const DELETE_ARCHIVED: &str = "WITH gone AS (DELETE FROM jobs_archive WHERE id = ANY ($1) RETURNING 1) \
     SELECT count(*) AS n, '{}'::int8[] AS held FROM gone";

#[derive(QueryableByName)]
struct Seen {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    gone: bool,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    changed: bool,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    held: bool,
}

#[derive(QueryableByName)]
struct ArchivedChange {
    #[diesel(sql_type = BigInt)]
    n: i64,
    #[diesel(sql_type = Array<BigInt>)]
    held: Vec<i64>,
}

/// Runs `hot` on `ids` in `jobs`, then `archived` on those it did not see there or saw
/// leave for the archive; returns how many jobs changed, and those left because another
/// job holds their key.
async fn hot_then_archived<C>(
    conn: &mut C,
    hot: &'static str,
    archived: &'static str,
    ids: &[i64],
) -> Result<Retried>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let seen: Vec<Seen> = diesel::sql_query(hot).bind::<Array<BigInt>, _>(ids).load(conn).await?;
    let changed = seen.iter().filter(|s| s.changed).count() as i64;
    let mut key_held: Vec<i64> = seen.iter().filter(|s| s.held && !s.changed).map(|s| s.id).collect();
    let stays: std::collections::HashSet<i64> = seen.iter().filter(|s| !s.gone).map(|s| s.id).collect();
    let rest: Vec<i64> = ids.iter().copied().filter(|id| !stays.contains(id)).collect();
    if rest.is_empty() {
        return Ok(Retried { retried: changed, key_held });
    }
    let row: ArchivedChange =
        diesel::sql_query(archived).bind::<Array<BigInt>, _>(&rest).get_result(conn).await?;
    key_held.extend(row.held);
    Ok(Retried { retried: changed + row.n, key_held })
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
pub(crate) async fn cancel_many<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    states_after(conn, CANCEL, ids).await
}

/// Makes the jobs of `ids` that are not running available now, granting one more attempt
/// to those that used them all; archived ones move back to `jobs`. A job whose uniqueness
/// key is held stays as it is (see [`Retried`]). Returns what changed.
pub(crate) async fn retry_many<C>(conn: &mut C, ids: &[i64]) -> Result<Retried>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    hot_then_archived(conn, RETRY, RETRY_ARCHIVED, ids).await
}

/// Deletes the jobs of `ids` that are not running (cancel them first), in `jobs` or in the
/// archive. Returns how many went.
pub(crate) async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(hot_then_archived(conn, DELETE, DELETE_ARCHIVED, ids).await?.retried)
}
