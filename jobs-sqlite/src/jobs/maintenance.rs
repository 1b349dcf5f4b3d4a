//! The leader's statements: promote due jobs, rescue stuck ones, prune finished ones; and
//! the node's own: hand back claims whose reply it never received.

use diesel::sql_types::{BigInt, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{JobPruneParams, JobReleaseOrphansParams, JobRescueStuckParams, Notification, Result};

use super::read::ids_json;
use crate::cached::CachedQuery;
use crate::rows::Id;
use crate::time::{millis, now_ms};

#[derive(QueryableByName)]
struct QueueRow {
    #[diesel(sql_type = Text)]
    queue: String,
}

const SCHEDULE_DUE: &str = "\
UPDATE jobs SET state = 'available'
WHERE id IN (
    SELECT id FROM jobs
    WHERE state IN ('scheduled', 'retryable') AND scheduled_at <= $1
    ORDER BY scheduled_at
    LIMIT $2
)
RETURNING queue";

/// Makes up to `limit` scheduled and retryable jobs due at `now_ms` available. Returns how
/// many moved and a wake-up per queue (added to `job_notifications`).
pub(crate) fn schedule_due(
    conn: &mut SqliteConnection,
    limit: i64,
    now_ms: i64,
) -> Result<(i64, Vec<Notification>)> {
    let rows: Vec<QueueRow> =
        CachedQuery::new(SCHEDULE_DUE).bind::<BigInt, _>(now_ms).bind::<BigInt, _>(limit).load(conn)?;
    let mut queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    let wake_ups: Vec<Notification> =
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect();
    for wake_up in &wake_ups {
        crate::notifications::add(conn, wake_up, now_ms)?;
    }
    Ok((rows.len() as i64, wake_ups))
}

/// Returns the jobs selected by `stuck` (a query over `jobs` giving `id`, `why` and
/// `message`, with `$1` the time in milliseconds and `$2` the same time as JSON) to the
/// queue: retryable and due now, discarded when out of attempts, cancelled when a cancel
/// was requested, with an error entry `rescued_<why>`. The attempt is unchanged, so a
/// late outcome is fenced out.
macro_rules! rescue_sql {
    ($stuck:literal) => {
        concat!(
            "\
UPDATE jobs
SET state = CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN jobs.attempt >= jobs.max_attempts THEN 'discarded'
                 ELSE 'retryable' END,
    finalized_at = CASE WHEN jobs.cancel_requested_at IS NOT NULL OR jobs.attempt >= jobs.max_attempts
                        THEN $1 END,
    scheduled_at = $1,
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
RETURNING jobs.id"
        )
    };
}

// $3 node staleness (ms), $4 timeout grace (ms), $5 limit, $6 the rescuer.
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
       OR NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = running.node AND n.heartbeat_at > $1 - $3)
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

/// See [`JobRescueStuckParams`].
pub(crate) fn rescue_stuck(
    conn: &mut SqliteConnection,
    params: &JobRescueStuckParams<'_>,
) -> Result<Vec<i64>> {
    let now = now_ms(params.now);
    let rows: Vec<Id> = CachedQuery::new(RESCUE_STUCK)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(at_json(now))
        .bind::<BigInt, _>(millis(params.node_stale_after))
        .bind::<BigInt, _>(millis(params.timeout_grace))
        .bind::<BigInt, _>(params.limit)
        .bind::<Text, _>(params.rescuer)
        .load(conn)?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// See [`JobReleaseOrphansParams`].
pub(crate) fn release_orphans(
    conn: &mut SqliteConnection,
    params: &JobReleaseOrphansParams<'_>,
) -> Result<Vec<i64>> {
    let now = now_ms(params.now);
    let rows: Vec<Id> = CachedQuery::new(RELEASE_ORPHANS)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(at_json(now))
        .bind::<Text, _>(params.node)
        .bind::<BigInt, _>(millis(params.grace))
        .bind::<Text, _>(ids_json(params.held))
        .load(conn)?;
    Ok(rows.into_iter().map(|r| r.id).collect())
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
