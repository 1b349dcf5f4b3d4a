//! Queue-wide settings shared by every node (pausing and resuming) and every queue's
//! pending work.

use diesel::mysql::Mysql;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncConnectionCore, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{Notification, QueueDepth, Result};

use crate::cached::CachedQuery;
use crate::notifications;
use crate::rows::{Flag, Name};

const SET_PAUSED: &str = "\
INSERT INTO job_queues (name, paused, paused_at, settings, created_at, updated_at)
VALUES ($1, $2, IF($2, UTC_TIMESTAMP(6), NULL), '{}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE paused = $2, paused_at = IF($2, UTC_TIMESTAMP(6), NULL), updated_at = UTC_TIMESTAMP(6)";

/// Pauses (`true`) or resumes (`false`) `queue` on every node: the flag is stored, and the
/// nodes are told through `job_notifications` when the transaction commits. Returns the
/// notification added.
pub(crate) async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<Notification>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    CachedQuery::new(SET_PAUSED).bind::<Text, _>(queue).bind::<Bool, _>(paused).execute(conn).await?;
    let told = Notification::QueuePaused { queue: queue.to_owned(), paused };
    notifications::add(conn, &told).await?;
    Ok(told)
}

/// Whether `queue` is paused.
pub(crate) async fn is_paused(conn: &mut AsyncMysqlConnection, queue: &str) -> Result<bool> {
    let rows: Vec<Flag> = CachedQuery::new("SELECT paused AS flag FROM job_queues WHERE name = $1")
        .bind::<Text, _>(queue)
        .load(conn)
        .await?;
    Ok(rows.iter().any(|r| r.flag))
}

/// The names of every paused queue.
pub(crate) async fn list_paused(conn: &mut AsyncMysqlConnection) -> Result<Vec<String>> {
    let rows: Vec<Name> =
        CachedQuery::new("SELECT name FROM job_queues WHERE paused ORDER BY name").load(conn).await?;
    Ok(rows.into_iter().map(|r| r.name).collect())
}

// One arm per state group, each read through an index that leads with the state.
const QUEUE_DEPTHS: &str = "\
WITH pending AS (
    SELECT queue, 'available' AS state, COUNT(*) AS n, MIN(scheduled_at) AS oldest
    FROM jobs WHERE state = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, state, COUNT(*), NULL FROM jobs WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
    UNION ALL
    SELECT queue, 'running', COUNT(*), NULL FROM jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT queue FROM pending
    UNION SELECT name FROM job_queues
    UNION SELECT k.name FROM job_nodes,
          JSON_TABLE(JSON_KEYS(job_nodes.queues), '$[*]' COLUMNS (name VARCHAR(255) PATH '$')) AS k
)
SELECT names.queue AS queue,
       CAST(COALESCE(SUM(IF(p.state = 'available', p.n, 0)), 0) AS SIGNED) AS available,
       CAST(COALESCE(SUM(IF(p.state = 'scheduled', p.n, 0)), 0) AS SIGNED) AS scheduled,
       CAST(COALESCE(SUM(IF(p.state = 'running', p.n, 0)), 0) AS SIGNED) AS running,
       CAST(COALESCE(SUM(IF(p.state = 'retryable', p.n, 0)), 0) AS SIGNED) AS retryable,
       CAST(TIMESTAMPDIFF(MICROSECOND, MIN(p.oldest), UTC_TIMESTAMP(6)) / 1000000 AS DOUBLE) AS oldest_available_secs,
       COALESCE(MAX(q.paused), 0) <> 0 AS paused
FROM names
LEFT JOIN pending p ON p.queue = names.queue
LEFT JOIN job_queues q ON q.name = names.queue
GROUP BY names.queue
ORDER BY names.queue";

/// Every queue with pending jobs, a stored setting, or a node running it: its pending
/// jobs per state, the age of its oldest available job, and its pause flag.
pub(crate) async fn list_depths(conn: &mut AsyncMysqlConnection) -> Result<Vec<QueueDepth>> {
    Ok(CachedQuery::new(QUEUE_DEPTHS).load(conn).await?)
}
