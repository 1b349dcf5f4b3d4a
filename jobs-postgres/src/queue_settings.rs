//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node and
//! its limits (global, per key and rate; claims obey them in `queue_limits`).

use diesel::pg::Pg;
use diesel::sql_types::{Integer, Nullable, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{
    QueueSetConcurrencyParams, QueueSetLimitsParams, QueueSettings, QueueSettingsParams, Result,
};

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

/// See [`QueueSetLimitsParams`].
pub(crate) async fn set_limits<C>(conn: &mut C, params: QueueSetLimitsParams<'_>) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query(
        "INSERT INTO job_queues AS q (name, settings)
         VALUES ($1, jsonb_strip_nulls(jsonb_build_object('global_limit', $2::int, 'rate_allowed', $3::int,
                                                          'rate_period_secs', $4::int, 'per_key_limit', $5::int)))
         ON CONFLICT (name) DO UPDATE
         SET settings = (q.settings - ARRAY['global_limit', 'rate_allowed', 'rate_period_secs', 'per_key_limit'])
                        || EXCLUDED.settings,
             updated_at = now()",
    )
    .bind::<Text, _>(params.queue)
    .bind::<Nullable<Integer>, _>(params.global_limit)
    .bind::<Nullable<Integer>, _>(params.rate.map(|r| i32::try_from(r.allowed).unwrap_or(i32::MAX)))
    .bind::<Nullable<Integer>, _>(params.rate.map(|r| i32::try_from(r.period_secs).unwrap_or(i32::MAX)))
    .bind::<Nullable<Integer>, _>(params.per_key_limit)
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
        "SELECT name AS queue, paused, (settings ->> 'concurrency')::int8 AS concurrency,
                (settings ->> 'global_limit')::int8 AS global_limit,
                (settings ->> 'per_key_limit')::int8 AS per_key_limit,
                (settings ->> 'rate_allowed')::int8 AS rate_allowed,
                (settings ->> 'rate_period_secs')::int8 AS rate_period_secs
         FROM job_queues
         WHERE $1::text IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(params.queue)
    .load(conn)
    .await?)
}
