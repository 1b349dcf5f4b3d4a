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

// One arm per state group, each read through an index that leads with the state, and one
// per other source of queue names, summed by queue in one pass. (Written as a CTE read
// twice, MariaDB ran the state arms again for every queue: 3 s for 24 queues at 1 M jobs.)
const QUEUE_DEPTHS: &str = "\
SELECT queue,
       CAST(SUM(available) AS SIGNED) AS available,
       CAST(SUM(scheduled) AS SIGNED) AS scheduled,
       CAST(SUM(running) AS SIGNED) AS running,
       CAST(SUM(retryable) AS SIGNED) AS retryable,
       CAST(TIMESTAMPDIFF(MICROSECOND, MIN(oldest), UTC_TIMESTAMP(6)) / 1000000 AS DOUBLE) AS oldest_available_secs,
       MAX(paused) <> 0 AS paused
FROM (
    SELECT queue, COUNT(*) AS available, 0 AS scheduled, 0 AS running, 0 AS retryable,
           MIN(scheduled_at) AS oldest, 0 AS paused
    FROM jobs WHERE state = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, 0, SUM(state = 'scheduled'), 0, SUM(state = 'retryable'), NULL, 0
    FROM jobs WHERE state IN ('scheduled', 'retryable') GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, COUNT(*), 0, NULL, 0 FROM jobs WHERE state = 'running' GROUP BY queue
    UNION ALL
    SELECT name, 0, 0, 0, 0, NULL, paused FROM job_queues
    UNION ALL
    SELECT k.name, 0, 0, 0, 0, NULL, 0 FROM job_nodes,
           JSON_TABLE(JSON_KEYS(job_nodes.queues), '$[*]' COLUMNS (name VARCHAR(255) PATH '$')) AS k
) AS sources
GROUP BY queue
ORDER BY queue";

/// Every queue with pending jobs, a stored setting, or a node running it: its pending
/// jobs per state, the age of its oldest available job, and its pause flag.
pub(crate) async fn list_depths(conn: &mut AsyncMysqlConnection) -> Result<Vec<QueueDepth>> {
    Ok(CachedQuery::new(QUEUE_DEPTHS).load(conn).await?)
}
