//! The scheduler's statement: scheduled and retryable jobs that are due become available.

use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Nullable, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobScheduleDueParams, Result};

use crate::notifications::available_channel;
use crate::rows::Count;

// Due jobs become available. One whose uniqueness key another job holds (a duplicate
// enqueued while it waited in a state outside its unique states), or that a job due with
// it takes first (the one that holds it already, then by priority, due time and id), is
// discarded instead, with an error entry: the batch never fails on the unique index.
const SCHEDULE_DUE: &str = concat!(
    "\
WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now),
due AS (
    SELECT id, unique_key, unique_states, priority, scheduled_at,
           COALESCE(state = ANY (unique_states), false) AS holds FROM jobs, clock
    WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= clock.now
    ORDER BY scheduled_at
    LIMIT $2
    FOR UPDATE OF jobs SKIP LOCKED
), ranked AS (
    SELECT d.id,
           (d.unique_key IS NOT NULL AND 'available' = ANY (d.unique_states)
            AND (row_number() OVER (PARTITION BY d.unique_key
                                   ORDER BY d.holds DESC, d.priority, d.scheduled_at, d.id) > 1
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
                 ELSE jobs.errors END,
        -- Discarded for a key another job takes: given up if discarded is a unique state.
        unique_key = CASE WHEN r.duplicate AND 'discarded' = ANY (jobs.unique_states) THEN NULL
                          ELSE jobs.unique_key END
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
