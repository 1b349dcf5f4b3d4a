//! Queue-wide settings shared by every node (pausing and resuming) and every queue's
//! pending work.

use diesel::pg::Pg;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{QueueDepth, Result};

use crate::notifications::control_channel;
use crate::rows::{Flag, Name};

// The nodes hear `{"queue": name, "paused": flag}` on the control channel, on commit.
const SET_PAUSED: &str = concat!(
    "\
WITH upsert AS (
    INSERT INTO job_queues AS q (name, paused, paused_at)
    VALUES ($1, $2, CASE WHEN $2 THEN now() END)
    ON CONFLICT (name) DO UPDATE
    SET paused = EXCLUDED.paused, paused_at = EXCLUDED.paused_at, updated_at = now()
    RETURNING q.name, q.paused
)
SELECT pg_notify('",
    control_channel!(),
    "', json_build_object('queue', name, 'paused', paused)::text)::text AS done FROM upsert"
);

/// Pauses (`true`) or resumes (`false`) `queue` on every node: the flag is stored, and the
/// nodes are told when the caller's transaction commits.
pub(crate) async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query(SET_PAUSED).bind::<Text, _>(queue).bind::<Bool, _>(paused).execute(conn).await?;
    Ok(())
}

/// Whether `queue` is paused.
pub(crate) async fn is_paused<C>(conn: &mut C, queue: &str) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Flag> = diesel::sql_query("SELECT paused AS flag FROM job_queues WHERE name = $1")
        .bind::<Text, _>(queue)
        .load(conn)
        .await?;
    Ok(rows.iter().any(|r| r.flag))
}

/// The names of every paused queue.
pub(crate) async fn list_paused<C>(conn: &mut C) -> Result<Vec<String>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Name> =
        diesel::sql_query("SELECT name FROM job_queues WHERE paused ORDER BY name").load(conn).await?;
    Ok(rows.into_iter().map(|r| r.name).collect())
}

// One arm per partial index (claim, due, running), so each reads only its own states.
const QUEUE_DEPTHS: &str = "\
WITH pending AS (
    SELECT queue, 'available'::job_state AS state, count(*) AS n, min(scheduled_at) AS oldest
    FROM jobs WHERE state = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, state, count(*), NULL FROM jobs WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
    UNION ALL
    SELECT queue, 'running'::job_state, count(*), NULL FROM jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT queue FROM pending
    UNION SELECT name FROM job_queues
    UNION SELECT jsonb_object_keys(queues) FROM job_nodes
)
SELECT names.queue,
       COALESCE(sum(n) FILTER (WHERE state = 'available'), 0)::int8 AS available,
       COALESCE(sum(n) FILTER (WHERE state = 'scheduled'), 0)::int8 AS scheduled,
       COALESCE(sum(n) FILTER (WHERE state = 'running'), 0)::int8 AS running,
       COALESCE(sum(n) FILTER (WHERE state = 'retryable'), 0)::int8 AS retryable,
       EXTRACT(EPOCH FROM now() - min(oldest))::float8 AS oldest_available_secs,
       COALESCE(bool_or(q.paused), false) AS paused
FROM names
LEFT JOIN pending ON pending.queue = names.queue
LEFT JOIN job_queues q ON q.name = names.queue
GROUP BY names.queue
ORDER BY names.queue";

/// Every queue with pending jobs, a stored setting, or a node running it: its pending
/// jobs per state, the age of its oldest available job, and its pause flag. Reads only
/// pending rows.
pub(crate) async fn list_depths<C>(conn: &mut C) -> Result<Vec<QueueDepth>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(diesel::sql_query(QUEUE_DEPTHS).load(conn).await?)
}
