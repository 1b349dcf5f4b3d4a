//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node and
//! its limits (global, per key and rate; claims obey them in `queue_limits`), and how much
//! of the limits is in use.

use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::rows::KeyLoadRow;
use jobs_driver::{
    LimitsUsage, QueueLimitsUsageParams, QueueSetConcurrencyParams, QueueSetLimitsParams, QueueSettings,
    QueueSettingsParams, RateWindow, Result,
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
         VALUES ($1, jsonb_strip_nulls(jsonb_build_object(
                 'global_limit', $2::int, 'rate_allowed', $3::int, 'rate_period_secs', $4::int,
                 'per_key_limit', $5::int, 'per_key_rate_allowed', $6::int, 'per_key_rate_period_secs', $7::int)))
         ON CONFLICT (name) DO UPDATE
         SET settings = (q.settings - ARRAY['global_limit', 'rate_allowed', 'rate_period_secs', 'per_key_limit',
                                            'per_key_rate_allowed', 'per_key_rate_period_secs'])
                        || EXCLUDED.settings,
             updated_at = now()",
    )
    .bind::<Text, _>(params.queue)
    .bind::<Nullable<Integer>, _>(params.global_limit)
    .bind::<Nullable<Integer>, _>(params.rate.map(|r| i32::try_from(r.allowed).unwrap_or(i32::MAX)))
    .bind::<Nullable<Integer>, _>(params.rate.map(|r| i32::try_from(r.period_secs).unwrap_or(i32::MAX)))
    .bind::<Nullable<Integer>, _>(params.per_key_limit)
    .bind::<Nullable<Integer>, _>(params.per_key_rate.map(|r| i32::try_from(r.allowed).unwrap_or(i32::MAX)))
    .bind::<Nullable<Integer>, _>(params.per_key_rate.map(|r| i32::try_from(r.period_secs).unwrap_or(i32::MAX)))
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
                (settings ->> 'rate_period_secs')::int8 AS rate_period_secs,
                (settings ->> 'per_key_rate_allowed')::int8 AS per_key_rate_allowed,
                (settings ->> 'per_key_rate_period_secs')::int8 AS per_key_rate_period_secs
         FROM job_queues
         WHERE $1::text IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(params.queue)
    .load(conn)
    .await?)
}

/// The running jobs per key (few: the queue's slots), the busiest `$3` with their waiting
/// jobs counted up to `$4` through jobs_partition_idx, and the totals on every row.
const KEY_LOADS: &str = "\
WITH r AS (
    SELECT meta ->> '_partition_key' AS key, count(*) AS running
    FROM jobs WHERE queue = $1 AND state = 'running' GROUP BY 1
), totals AS (
    SELECT count(*) AS keys_running, count(*) FILTER (WHERE running >= $2) AS keys_at_limit FROM r
)
SELECT top.key, top.running,
       CASE WHEN top.key IS NOT NULL THEN
           (SELECT count(*) FROM (SELECT 1 FROM jobs
                WHERE queue = $1 AND state = 'available' AND (meta ->> '_partition_key') IS NOT NULL
                  AND (meta ->> '_partition_key') = top.key LIMIT $4) AS a)
       END AS available,
       totals.keys_running, totals.keys_at_limit
FROM (SELECT key, running FROM r ORDER BY running DESC, key NULLS FIRST LIMIT $3) AS top, totals
ORDER BY top.running DESC, top.key NULLS FIRST";

#[derive(diesel::QueryableByName)]
struct RateRow {
    #[diesel(sql_type = Nullable<diesel::sql_types::Timestamptz>)]
    rate_window: Option<chrono::DateTime<chrono::Utc>>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = BigInt)]
    used_up: i64,
}

/// See [`QueueLimitsUsageParams`].
pub(crate) async fn limits_usage<C>(conn: &mut C, params: QueueLimitsUsageParams<'_>) -> Result<LimitsUsage>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<KeyLoadRow> = diesel::sql_query(KEY_LOADS)
        .bind::<Text, _>(params.queue)
        .bind::<Nullable<BigInt>, _>(params.per_key_limit)
        .bind::<BigInt, _>(i64::try_from(params.top).unwrap_or(i64::MAX))
        .bind::<BigInt, _>(params.cap)
        .load(conn)
        .await?;
    let rate: Vec<RateRow> = diesel::sql_query(
        "SELECT rate_window, rate_counts,
                (SELECT count(*) FROM job_key_rates r
                 WHERE r.queue = $1 AND r.blocked_until IS NOT NULL AND r.blocked_until > now()) AS used_up
         FROM job_queues WHERE name = $1",
    )
    .bind::<Text, _>(params.queue)
    .load(conn)
    .await?;
    let used_up = rate.iter().map(|r| r.used_up).next().unwrap_or(0);
    let window =
        rate.into_iter().next().and_then(|r| RateWindow::decode(r.rate_window, r.rate_counts.as_deref()));
    Ok(LimitsUsage { keys_rate_used_up: used_up, ..LimitsUsage::from_rows(rows, window) })
}
