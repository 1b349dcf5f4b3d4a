//! The scheduler's statement: scheduled and retryable jobs that are due become available.

use diesel::sql_types::{BigInt, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{JobState, Notification, Result};

use crate::cached::CachedQuery;
use crate::time::at_json;

// Due jobs become available. One whose uniqueness key another job holds (a duplicate
// enqueued while it waited in a state outside its unique states), or that a job due with
// it takes first (the one that holds it already, then by priority, due time and id), is
// discarded instead, with an error entry: the batch never fails on the unique index.
const SCHEDULE_DUE: &str = concat!(
    "\
UPDATE jobs
SET state = CASE WHEN r.duplicate THEN 'discarded' ELSE 'available' END,
    finalized_at = CASE WHEN r.duplicate THEN $1 END,
    errors = CASE WHEN r.duplicate THEN json_insert(errors, '$[#]', json_object(
                 'attempt', attempt, 'at', json($3), 'error_type', 'unique_conflict',
                 'message', 'another job holds its uniqueness key'))
             ELSE errors END,
    unique_key = CASE WHEN r.duplicate AND instr(unique_states, '\"discarded\"') > 0 THEN NULL ELSE unique_key END
FROM (
    SELECT d.id,
           (d.unique_key IS NOT NULL AND instr(d.unique_states, '\"available\"') > 0
            AND (row_number() OVER (PARTITION BY d.unique_key
                                   ORDER BY d.holds DESC, d.priority, d.scheduled_at, d.id) > 1
                 OR ",
    key_held_by_another!("d"),
    ")) AS duplicate
    FROM (SELECT id, unique_key, unique_states, priority, scheduled_at,
                 instr(unique_states, '\"' || state || '\"') > 0 AS holds FROM jobs
          WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= $1
          ORDER BY scheduled_at
          LIMIT $2) AS d
) AS r
WHERE jobs.id = r.id
RETURNING jobs.queue, jobs.state"
);

#[derive(QueryableByName)]
struct Moved {
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    state: String,
}

/// Makes up to `limit` scheduled and retryable jobs due at `now_ms` available (discarding
/// those whose uniqueness key is taken, see [`SCHEDULE_DUE`]). Returns how many became
/// available and a wake-up per queue (added to `job_notifications`).
pub(crate) fn schedule_due(
    conn: &mut SqliteConnection,
    limit: i64,
    now_ms: i64,
) -> Result<(i64, Vec<Notification>)> {
    let rows: Vec<Moved> = CachedQuery::new(SCHEDULE_DUE)
        .bind::<BigInt, _>(now_ms)
        .bind::<BigInt, _>(limit)
        .bind::<Text, _>(at_json(now_ms))
        .load(conn)?;
    let available: Vec<&str> =
        rows.iter().filter(|r| r.state == JobState::Available.as_str()).map(|r| r.queue.as_str()).collect();
    let moved = available.len() as i64;
    let wake_ups = crate::notifications::per_queue(available);
    for wake_up in &wake_ups {
        crate::notifications::add(conn, wake_up)?;
    }
    Ok((moved, wake_ups))
}
