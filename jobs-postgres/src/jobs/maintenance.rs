//! The leader's queries: promote due jobs, rescue stuck ones, prune finished ones; and
//! the node's own: hand back claims whose reply it never received.

use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bool, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{
    JobPruneParams, JobReleaseOrphansParams, JobRescueStuckParams, JobScheduleDueParams, Result,
};

use crate::channels::available_channel;
use crate::rows::{Count, Id, millis};

/// Whether job `$j` (a row with `id`, `unique_key`, `unique_states`) would break its
/// uniqueness by becoming available: another row holds its key in that row's own unique
/// states. (The terms repeat `jobs_unique_idx`'s predicate, so the lookup uses it.)
macro_rules! key_held_by_another {
    ($j:literal) => {
        concat!(
            "(",
            $j,
            ".unique_key IS NOT NULL AND 'available' = ANY (",
            $j,
            ".unique_states) AND EXISTS (
                SELECT 1 FROM jobs o WHERE o.unique_key = ",
            $j,
            ".unique_key AND o.unique_key IS NOT NULL
                  AND o.state = ANY (o.unique_states) AND o.id <> ",
            $j,
            ".id))"
        )
    };
}

// Due jobs become available. One whose uniqueness key another job holds (a duplicate
// enqueued while it waited in a state outside its unique states), or that a job due with
// it takes first (by priority, then due time, then id), is discarded instead, with an
// error entry: the batch never fails on the unique index.
const SCHEDULE_DUE: &str = concat!(
    "\
WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now),
due AS (
    SELECT id, unique_key, unique_states, priority, scheduled_at FROM jobs, clock
    WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= clock.now
    ORDER BY scheduled_at
    LIMIT $2
    FOR UPDATE OF jobs SKIP LOCKED
), ranked AS (
    SELECT d.id,
           (d.unique_key IS NOT NULL AND 'available' = ANY (d.unique_states)
            AND (row_number() OVER (PARTITION BY d.unique_key ORDER BY d.priority, d.scheduled_at, d.id) > 1
                 OR ",
    key_held_by_another!("d"),
    ")) AS duplicate
    FROM due d
), moved AS (
    UPDATE jobs
    SET state = CASE WHEN r.duplicate THEN 'discarded'::job_state ELSE 'available'::job_state END,
        finalized_at = CASE WHEN r.duplicate THEN clock.now END,
        errors = CASE WHEN r.duplicate THEN jobs.errors || jsonb_build_array(jsonb_build_object(
                     'attempt', jobs.attempt, 'at', clock.now, 'error_type', 'unique_conflict',
                     'message', 'another job holds its uniqueness key'))
                 ELSE jobs.errors END
    FROM ranked r, clock WHERE jobs.id = r.id
    RETURNING jobs.queue, jobs.state
), woken AS (
    SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM moved WHERE state = 'available') AS q
)
SELECT (SELECT count(*) FROM moved WHERE state = 'available') + 0 * (SELECT count(*) FROM woken) AS n"
);

/// See [`JobScheduleDueParams`].
pub(crate) async fn schedule_due<C>(conn: &mut C, params: JobScheduleDueParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Count = diesel::sql_query(SCHEDULE_DUE)
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<BigInt, _>(params.limit)
        .get_result(conn)
        .await?;
    Ok(row.n)
}

/// Returns the jobs selected by `stuck` (a query over `jobs` and `clock` giving `id`,
/// `why` and `message`, locking what it picks) to the queue in their place in line:
/// `available` with their priority and `scheduled_at` unchanged (their queues woken), or
/// discarded when out of attempts or when another job holds their uniqueness key (a
/// duplicate enqueued while they ran), cancelled when a cancel was requested; each with an
/// error entry `rescued_<why>`. The attempt is unchanged, so a late outcome is fenced out.
macro_rules! rescue_sql {
    ($stuck:literal) => {
        concat!(
            "WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now),\nstuck AS (",
            $stuck,
            "), rescued AS (
UPDATE jobs
SET state = CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'::job_state
                 WHEN jobs.attempt >= jobs.max_attempts OR ",
            key_held_by_another!("jobs"),
            " THEN 'discarded'::job_state
                 ELSE 'available'::job_state END,
    finalized_at = CASE WHEN jobs.cancel_requested_at IS NOT NULL OR jobs.attempt >= jobs.max_attempts OR ",
            key_held_by_another!("jobs"),
            " THEN clock.now END,
    errors = jobs.errors || jsonb_build_array(jsonb_build_object(
        'attempt', jobs.attempt,
        'at', clock.now,
        'node', jobs.attempted_by[cardinality(jobs.attempted_by)],
        'error_type', 'rescued_' || stuck.why,
        'message', stuck.message))
FROM stuck, clock
WHERE jobs.id = stuck.id
RETURNING jobs.id, jobs.queue, jobs.state
), woken AS (
    SELECT pg_notify('",
            available_channel!(),
            "', queue) FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') AS q
)
SELECT id FROM rescued, (SELECT count(*) FROM woken) AS w"
        )
    };
}

const RESCUE_STUCK: &str = rescue_sql!(
    "
    SELECT jobs.id, t.why,
           CASE WHEN t.why = 'timeout'
                THEN 'still running ' || $3 || ' ms past its timeout; rescued by ' || $5
                ELSE 'its node stopped heartbeating; rescued by ' || $5 END AS message
    FROM jobs, clock,
         LATERAL (SELECT CASE WHEN jobs.timeout_ms IS NOT NULL
                    AND jobs.attempted_at + (jobs.timeout_ms + $3) * interval '1 millisecond' < clock.now
                   THEN 'timeout' ELSE 'node_lost' END AS why) AS t
    WHERE jobs.state = 'running'
      AND ((jobs.timeout_ms IS NOT NULL
            AND jobs.attempted_at + (jobs.timeout_ms + $3) * interval '1 millisecond' < clock.now)
        OR ($6 AND NOT EXISTS (SELECT 1 FROM job_nodes n
                               WHERE n.name = jobs.attempted_by[cardinality(jobs.attempted_by)]
                                 AND n.heartbeat_at > clock.now - $2 * interval '1 millisecond')))
    LIMIT $4
    FOR UPDATE OF jobs SKIP LOCKED
"
);

const RELEASE_ORPHANS: &str = rescue_sql!(
    "
    SELECT jobs.id, 'orphaned' AS why,
           'claimed by ' || $2 || ', which never received the claim (its connection was lost); released by the same node' AS message
    FROM jobs, clock
    WHERE jobs.state = 'running'
      AND jobs.attempted_by[cardinality(jobs.attempted_by)] = $2
      AND jobs.attempted_at < clock.now - $3 * interval '1 millisecond'
      AND NOT (jobs.id = ANY($4))
    LIMIT 1000
    FOR UPDATE OF jobs SKIP LOCKED
"
);

/// See [`JobReleaseOrphansParams`].
pub(crate) async fn release_orphans<C>(conn: &mut C, params: JobReleaseOrphansParams<'_>) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Id> = diesel::sql_query(RELEASE_ORPHANS)
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<Text, _>(params.node)
        .bind::<BigInt, _>(millis(params.grace))
        .bind::<Array<BigInt>, _>(params.held)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// See [`JobRescueStuckParams`].
pub(crate) async fn rescue_stuck<C>(conn: &mut C, params: JobRescueStuckParams<'_>) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Id> = diesel::sql_query(RESCUE_STUCK)
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<BigInt, _>(millis(params.node_stale_after))
        .bind::<BigInt, _>(millis(params.timeout_grace))
        .bind::<BigInt, _>(params.limit)
        .bind::<Text, _>(params.rescuer)
        .bind::<Bool, _>(params.lost_nodes)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

// Oldest first, in the archive and among the finished jobs still in `jobs` (those that
// hold their uniqueness key, and those the archiver has not moved yet).
macro_rules! prune_from {
    ($table:literal) => {
        concat!(
            "doomed_",
            $table,
            " AS (
    SELECT id FROM ",
            $table,
            ", clock
    WHERE state = $1::job_state AND finalized_at < clock.cutoff
    ORDER BY finalized_at
    LIMIT $4
    FOR UPDATE OF ",
            $table,
            " SKIP LOCKED
), gone_",
            $table,
            " AS (
    DELETE FROM ",
            $table,
            " USING doomed_",
            $table,
            " AS d WHERE ",
            $table,
            ".id = d.id RETURNING 1
)"
        )
    };
}

const PRUNE: &str = concat!(
    "WITH clock AS (SELECT COALESCE($3::timestamptz, now()) - $2 * interval '1 millisecond' AS cutoff),\n",
    prune_from!("jobs_archive"),
    ",\n",
    prune_from!("jobs"),
    "
SELECT (SELECT count(*) FROM gone_jobs_archive) + (SELECT count(*) FROM gone_jobs) AS n"
);

/// See [`JobPruneParams`].
pub(crate) async fn prune<C>(conn: &mut C, params: JobPruneParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Count = diesel::sql_query(PRUNE)
        .bind::<Text, _>(params.state.as_str())
        .bind::<BigInt, _>(millis(params.retention))
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<BigInt, _>(params.limit)
        .get_result(conn)
        .await?;
    Ok(row.n)
}
