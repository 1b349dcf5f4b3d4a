//! The leader's statements: promote due jobs, rescue stuck ones, prune finished ones; and
//! the node's own: hand back claims whose reply it never received.

use diesel::sql_types::{BigInt, Bool, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{
    JobPruneParams, JobReleaseOrphansParams, JobRescueStuckParams, JobState, Notification, Result,
};

use super::read::ids_json;
use crate::cached::CachedQuery;
use crate::time::{millis, now_ms};

/// Whether job `$j` (a row with `id`, `unique_key`, `unique_states`) would break its
/// uniqueness by becoming available: another row holds its key in that row's own unique
/// states. (The terms repeat `jobs_unique_idx`'s predicate, so the lookup uses it.)
macro_rules! key_held_by_another {
    ($j:literal) => {
        concat!(
            "(",
            $j,
            ".unique_key IS NOT NULL AND instr(",
            $j,
            ".unique_states, '\"available\"') > 0 AND EXISTS (
                SELECT 1 FROM jobs o WHERE o.unique_key = ",
            $j,
            ".unique_key AND o.unique_key IS NOT NULL
                  AND instr(o.unique_states, '\"' || o.state || '\"') > 0 AND o.id <> ",
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
UPDATE jobs
SET state = CASE WHEN r.duplicate THEN 'discarded' ELSE 'available' END,
    finalized_at = CASE WHEN r.duplicate THEN $1 END,
    errors = CASE WHEN r.duplicate THEN json_insert(errors, '$[#]', json_object(
                 'attempt', attempt, 'at', json($3), 'error_type', 'unique_conflict',
                 'message', 'another job holds its uniqueness key'))
             ELSE errors END
FROM (
    SELECT d.id,
           (d.unique_key IS NOT NULL AND instr(d.unique_states, '\"available\"') > 0
            AND (row_number() OVER (PARTITION BY d.unique_key ORDER BY d.priority, d.scheduled_at, d.id) > 1
                 OR ",
    key_held_by_another!("d"),
    ")) AS duplicate
    FROM (SELECT id, unique_key, unique_states, priority, scheduled_at FROM jobs
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
    let wake_ups = wake_ups(available);
    for wake_up in &wake_ups {
        crate::notifications::add(conn, wake_up)?;
    }
    Ok((moved, wake_ups))
}

/// One wake-up per distinct queue of `queues`.
fn wake_ups(mut queues: Vec<&str>) -> Vec<Notification> {
    queues.sort_unstable();
    queues.dedup();
    queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect()
}

/// Returns the jobs selected by `stuck` (a query over `jobs` giving `id`, `why` and
/// `message`, with `$1` the time in milliseconds and `$2` the same time as JSON) to the
/// queue in their place in line: `available` with their priority and `scheduled_at`
/// unchanged, or discarded when out of attempts or when another job holds their uniqueness
/// key (a duplicate enqueued while they ran), cancelled when a cancel was requested;
/// each with an error entry `rescued_<why>`. The attempt is unchanged, so a late outcome is
/// fenced out. Returns each rescued job's id, queue and new state.
macro_rules! rescue_sql {
    ($stuck:literal) => {
        concat!(
            "\
UPDATE jobs
SET state = CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN jobs.attempt >= jobs.max_attempts OR ",
            key_held_by_another!("jobs"),
            " THEN 'discarded'
                 ELSE 'available' END,
    finalized_at = CASE WHEN jobs.cancel_requested_at IS NOT NULL OR jobs.attempt >= jobs.max_attempts OR ",
            key_held_by_another!("jobs"),
            " THEN $1 END,
    errors = json_insert(jobs.errors, '$[#]', json_object(
        'attempt', jobs.attempt,
        'at', json($2),
        'node', jobs.attempted_by ->> '$[#-1]',
        'error_type', 'rescued_' || stuck.why,
        'message', stuck.message))
FROM (",
            $stuck,
            ") AS stuck
WHERE jobs.id = stuck.id
RETURNING jobs.id, jobs.queue, jobs.state"
        )
    };
}

#[derive(QueryableByName)]
struct Rescued {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    state: String,
}

/// The ids of `rescued`, after adding a wake-up for each queue that got available jobs
/// back. Returns the ids and the wake-ups.
fn wake_rescued(conn: &mut SqliteConnection, rescued: Vec<Rescued>) -> Result<(Vec<i64>, Vec<Notification>)> {
    let available: Vec<&str> = rescued
        .iter()
        .filter(|r| r.state == JobState::Available.as_str())
        .map(|r| r.queue.as_str())
        .collect();
    let wake_ups = wake_ups(available);
    for wake_up in &wake_ups {
        crate::notifications::add(conn, wake_up)?;
    }
    Ok((rescued.into_iter().map(|r| r.id).collect(), wake_ups))
}

// $3 node staleness (ms), $4 timeout grace (ms), $5 limit, $6 the rescuer, $7 whether to
// rescue the jobs of lost nodes.
const RESCUE_STUCK: &str = rescue_sql!(
    "
    SELECT id,
           CASE WHEN timed_out THEN 'timeout' ELSE 'node_lost' END AS why,
           CASE WHEN timed_out THEN 'still running ' || $4 || ' ms past its timeout; rescued by ' || $6
                ELSE 'its node stopped heartbeating; rescued by ' || $6 END AS message
    FROM (SELECT id, (timeout_ms IS NOT NULL AND attempted_at + timeout_ms + $4 < $1) AS timed_out,
                 attempted_by ->> '$[#-1]' AS node
          FROM jobs WHERE state = 'running') AS running
    WHERE timed_out
       OR ($7 AND NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = running.node AND n.heartbeat_at > $1 - $3))
    LIMIT $5
"
);

// $3 the node, $4 grace (ms), $5 the ids it holds (a JSON array).
const RELEASE_ORPHANS: &str = rescue_sql!(
    "
    SELECT id, 'orphaned' AS why,
           'claimed by ' || $3 || ', which never received the claim (its connection was lost); released by the same node' AS message
    FROM jobs
    WHERE state = 'running'
      AND attempted_by ->> '$[#-1]' = $3
      AND attempted_at < $1 - $4
      AND id NOT IN (SELECT value FROM json_each($5))
    LIMIT 1000
"
);

/// The operation's time as the JSON an error entry's `at` holds (as the engine writes it).
fn at_json(now_ms: i64) -> String {
    serde_json::to_string(&crate::time::from_ms(now_ms)).unwrap_or_else(|_| "null".into())
}

/// See [`JobRescueStuckParams`]. Returns the rescued ids and the wake-ups added.
pub(crate) fn rescue_stuck(
    conn: &mut SqliteConnection,
    params: &JobRescueStuckParams<'_>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let now = now_ms(params.now);
    let rows: Vec<Rescued> = CachedQuery::new(RESCUE_STUCK)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(at_json(now))
        .bind::<BigInt, _>(millis(params.node_stale_after))
        .bind::<BigInt, _>(millis(params.timeout_grace))
        .bind::<BigInt, _>(params.limit)
        .bind::<Text, _>(params.rescuer)
        .bind::<Bool, _>(params.lost_nodes)
        .load(conn)?;
    wake_rescued(conn, rows)
}

/// See [`JobReleaseOrphansParams`]. Returns the released ids and the wake-ups added.
pub(crate) fn release_orphans(
    conn: &mut SqliteConnection,
    params: &JobReleaseOrphansParams<'_>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let now = now_ms(params.now);
    let rows: Vec<Rescued> = CachedQuery::new(RELEASE_ORPHANS)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(at_json(now))
        .bind::<Text, _>(params.node)
        .bind::<BigInt, _>(millis(params.grace))
        .bind::<Text, _>(ids_json(params.held))
        .load(conn)?;
    wake_rescued(conn, rows)
}

const PRUNE: &str = "\
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE state = $1 AND finalized_at IS NOT NULL AND finalized_at < $2
    ORDER BY finalized_at
    LIMIT $3
)";

/// See [`JobPruneParams`].
pub(crate) fn prune(conn: &mut SqliteConnection, params: &JobPruneParams) -> Result<i64> {
    let cutoff = now_ms(params.now).saturating_sub(millis(params.retention));
    let n = CachedQuery::new(PRUNE)
        .bind::<Text, _>(params.state.as_str())
        .bind::<BigInt, _>(cutoff)
        .bind::<BigInt, _>(params.limit)
        .execute(conn)?;
    Ok(n as i64)
}
