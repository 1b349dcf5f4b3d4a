//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node.

use diesel::pg::Pg;
use diesel::sql_types::{Integer, Nullable, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{QueueSetConcurrencyParams, QueueSettings, QueueSettingsParams, Result};

/// See [`QueueSetConcurrencyParams`].
pub(crate) async fn set_concurrency<C>(conn: &mut C, params: QueueSetConcurrencyParams<'_>) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query(
        "INSERT INTO job_queues AS q (name, settings)
         VALUES ($1, CASE WHEN $2::int IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('concurrency', $2::int) END)
         ON CONFLICT (name) DO UPDATE
         SET settings = CASE WHEN $2::int IS NULL THEN q.settings - 'concurrency'
                             ELSE q.settings || jsonb_build_object('concurrency', $2::int) END,
             updated_at = now()",
    )
    .bind::<Text, _>(params.queue)
    .bind::<Nullable<Integer>, _>(params.concurrency)
    .execute(conn)
    .await?;
    Ok(())
}

/// See [`QueueSettingsParams`].
pub(crate) async fn settings<C>(conn: &mut C, params: QueueSettingsParams<'_>) -> Result<Vec<QueueSettings>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(diesel::sql_query(
        "SELECT name AS queue, paused, (settings ->> 'concurrency')::int8 AS concurrency FROM job_queues
         WHERE $1::text IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(params.queue)
    .load(conn)
    .await?)
}
