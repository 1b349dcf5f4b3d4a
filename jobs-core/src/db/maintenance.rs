//! The leader's queries: promote due jobs, rescue stuck ones, prune finished ones.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::error::Result;
use crate::state::JobState;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

const SCHEDULE_DUE: &str = "\
WITH due AS (
    SELECT id FROM jobs
    WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= COALESCE($1::timestamptz, now())
    ORDER BY scheduled_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE jobs SET state = 'available' FROM due WHERE jobs.id = due.id RETURNING jobs.queue
), woken AS (
    SELECT pg_notify('jobs_available', queue) FROM (SELECT DISTINCT queue FROM moved) AS q
)
SELECT (SELECT count(*) FROM moved) + 0 * (SELECT count(*) FROM woken) AS n";

/// Makes up to `limit` scheduled and retryable jobs whose time has come available, and
/// wakes their queues' workers. Returns how many moved.
pub async fn schedule_due<C>(conn: &mut C, limit: i64, now: Option<DateTime<Utc>>) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let row: Count = diesel::sql_query(SCHEDULE_DUE)
        .bind::<Nullable<Timestamptz>, _>(now)
        .bind::<BigInt, _>(limit)
        .get_result(conn)
        .await?;
    Ok(row.n)
}

/// Returns the jobs selected by `stuck` (a query over `jobs` and `clock` giving `id`,
/// `why` and `message`, locking what it picks) to the queue: retryable and due now,
/// discarded when out of attempts, cancelled when a cancel was requested, with an error
/// entry `rescued_<why>`. The attempt is unchanged, so a late outcome is fenced out.
macro_rules! rescue_sql {
    ($stuck:literal) => {
        concat!(
            "WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now),\nstuck AS (",
            $stuck,
            ")
UPDATE jobs
SET state = CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'::job_state
                 WHEN jobs.attempt >= jobs.max_attempts THEN 'discarded'::job_state
                 ELSE 'retryable'::job_state END,
    finalized_at = CASE WHEN jobs.cancel_requested_at IS NOT NULL OR jobs.attempt >= jobs.max_attempts
                        THEN clock.now END,
    scheduled_at = clock.now,
    errors = jobs.errors || jsonb_build_array(jsonb_build_object(
        'attempt', jobs.attempt,
        'at', clock.now,
        'node', jobs.attempted_by[cardinality(jobs.attempted_by)],
        'error_type', 'rescued_' || stuck.why,
        'message', stuck.message))
FROM stuck, clock
WHERE jobs.id = stuck.id
RETURNING jobs.id"
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
        OR NOT EXISTS (SELECT 1 FROM job_nodes n
                       WHERE n.name = jobs.attempted_by[cardinality(jobs.attempted_by)]
                         AND n.heartbeat_at > clock.now - $2 * interval '1 millisecond'))
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

/// Returns to the queue the `running` jobs attributed to `node` that it does not hold
/// (`held`) and that were claimed more than `grace` ago: claims whose reply never reached
/// the node. Same outcome as a rescue (`rescued_orphaned`). Returns their ids.
pub async fn release_orphans<C>(
    conn: &mut C,
    node: &str,
    held: &[i64],
    grace: Duration,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let rows: Vec<Id> = diesel::sql_query(RELEASE_ORPHANS)
        .bind::<Nullable<Timestamptz>, _>(now)
        .bind::<Text, _>(node)
        .bind::<BigInt, _>(ms(grace))
        .bind::<Array<BigInt>, _>(held)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Rescues `running` jobs that nobody is running any more: those whose node has not
/// heartbeated within `node_stale_after` (or has no node row), and those still running
/// `timeout_grace` past their timeout. They become retryable (due now), discarded when
/// out of attempts, or cancelled when a cancel was requested. The attempt is unchanged,
/// so a late completion from the original worker is fenced out. Returns the rescued ids.
pub async fn rescue_stuck<C>(
    conn: &mut C,
    node_stale_after: Duration,
    timeout_grace: Duration,
    limit: i64,
    rescuer: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let rows: Vec<Id> = diesel::sql_query(RESCUE_STUCK)
        .bind::<Nullable<Timestamptz>, _>(now)
        .bind::<BigInt, _>(ms(node_stale_after))
        .bind::<BigInt, _>(ms(timeout_grace))
        .bind::<BigInt, _>(limit)
        .bind::<Text, _>(rescuer)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

const PRUNE: &str = "\
WITH doomed AS (
    SELECT id FROM jobs
    WHERE state = $1::job_state
      AND finalized_at < COALESCE($3::timestamptz, now()) - $2 * interval '1 millisecond'
    ORDER BY finalized_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM jobs USING doomed WHERE jobs.id = doomed.id RETURNING jobs.id
)
SELECT count(*) AS n FROM gone";

/// Deletes at most `limit` jobs in final state `state` that were finalized more than
/// `retention` ago, oldest first. Returns how many went.
pub async fn prune<C>(
    conn: &mut C,
    state: JobState,
    retention: Duration,
    limit: i64,
    now: Option<DateTime<Utc>>,
) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let row: Count = diesel::sql_query(PRUNE)
        .bind::<Text, _>(state.as_str())
        .bind::<BigInt, _>(ms(retention))
        .bind::<Nullable<Timestamptz>, _>(now)
        .bind::<BigInt, _>(limit)
        .get_result(conn)
        .await?;
    Ok(row.n)
}
