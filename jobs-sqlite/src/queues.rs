//! Queue-wide settings shared by every node (pausing and resuming) and every queue's
//! pending work.

use diesel::sql_types::{BigInt, Bool, Text};
use diesel::sqlite::Sqlite;
use diesel::{RunQueryDsl, SqliteConnection};
use diesel_async::AsyncConnectionCore;
use jobs_driver::{Notification, QueueDepth, Result};

use crate::cached::CachedQuery;
use crate::notifications;
use crate::rows::{Flag, Name};

const SET_PAUSED: &str = "\
INSERT INTO job_queues (name, paused, paused_at, created_at, updated_at)
VALUES ($1, $2, CASE WHEN $2 THEN $3 END, $3, $3)
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused, paused_at = excluded.paused_at, updated_at = excluded.updated_at";

/// Pauses (`true`) or resumes (`false`) `queue` on every node: the flag is stored, and the
/// nodes are told through `job_notifications` when the transaction commits. Returns the
/// notification added.
pub(crate) async fn set_paused<C>(
    conn: &mut C,
    queue: &str,
    paused: bool,
    now_ms: i64,
) -> Result<Notification>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    diesel_async::RunQueryDsl::execute(
        CachedQuery::new(SET_PAUSED).bind::<Text, _>(queue).bind::<Bool, _>(paused).bind::<BigInt, _>(now_ms),
        conn,
    )
    .await?;
    let told = Notification::QueuePaused { queue: queue.to_owned(), paused };
    notifications::add_async(conn, &told).await?;
    Ok(told)
}

/// Whether `queue` is paused.
pub(crate) fn is_paused(conn: &mut SqliteConnection, queue: &str) -> Result<bool> {
    let rows: Vec<Flag> = CachedQuery::new("SELECT paused AS flag FROM job_queues WHERE name = $1")
        .bind::<Text, _>(queue)
        .load(conn)?;
    Ok(rows.iter().any(|r| r.flag))
}

/// The names of every paused queue.
pub(crate) fn list_paused(conn: &mut SqliteConnection) -> Result<Vec<String>> {
    let rows: Vec<Name> =
        CachedQuery::new("SELECT name FROM job_queues WHERE paused ORDER BY name").load(conn)?;
    Ok(rows.into_iter().map(|r| r.name).collect())
}

// One arm per partial index (claim, due, running), so each reads only its own states.
const QUEUE_DEPTHS: &str = "\
WITH pending AS (
    SELECT queue, 'available' AS state, count(*) AS n, min(scheduled_at) AS oldest
    FROM jobs WHERE state = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, state, count(*), NULL FROM jobs WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
    UNION ALL
    SELECT queue, 'running', count(*), NULL FROM jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT queue FROM pending
    UNION SELECT name FROM job_queues
    UNION SELECT key FROM job_nodes, json_each(job_nodes.queues)
)
SELECT names.queue AS queue,
       COALESCE(sum(CASE WHEN state = 'available' THEN n END), 0) AS available,
       COALESCE(sum(CASE WHEN state = 'scheduled' THEN n END), 0) AS scheduled,
       COALESCE(sum(CASE WHEN state = 'running' THEN n END), 0) AS running,
       COALESCE(sum(CASE WHEN state = 'retryable' THEN n END), 0) AS retryable,
       ($1 - min(oldest)) / 1000.0 AS oldest_available_secs,
       COALESCE(max(q.paused), 0) AS paused
FROM names
LEFT JOIN pending ON pending.queue = names.queue
LEFT JOIN job_queues q ON q.name = names.queue
GROUP BY names.queue
ORDER BY names.queue";

/// Every queue with pending jobs, a stored setting, or a node running it: its pending
/// jobs per state, the age of its oldest available job at `now_ms`, and its pause flag.
pub(crate) fn list_depths(conn: &mut SqliteConnection, now_ms: i64) -> Result<Vec<QueueDepth>> {
    Ok(CachedQuery::new(QUEUE_DEPTHS).bind::<BigInt, _>(now_ms).load(conn)?)
}
