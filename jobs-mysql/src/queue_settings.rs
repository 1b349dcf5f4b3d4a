//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node and
//! its limits (global and rate; claims obey them in `queue_limits`).

use diesel::sql_types::{Integer, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{
    QueueSetConcurrencyParams, QueueSetLimitsParams, QueueSettings, QueueSettingsParams, Result,
};

use crate::cached::CachedQuery;

/// See [`QueueSetConcurrencyParams`].
pub(crate) async fn set_concurrency(
    conn: &mut AsyncMysqlConnection,
    params: QueueSetConcurrencyParams<'_>,
) -> Result<()> {
    CachedQuery::new(
        "INSERT INTO job_queues (name, paused, settings, created_at, updated_at)
         VALUES ($1, FALSE, IF($2 IS NULL, '{}', JSON_OBJECT('concurrency', $2)), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
         ON DUPLICATE KEY UPDATE
         settings = IF($2 IS NULL, JSON_REMOVE(settings, '$.concurrency'), JSON_SET(settings, '$.concurrency', $2)),
         updated_at = UTC_TIMESTAMP(6)",
    )
    .bind::<Text, _>(params.queue)
    .bind::<Nullable<Integer>, _>(params.concurrency)
    .execute(conn)
    .await?;
    Ok(())
}

/// See [`QueueSetLimitsParams`]. A merge patch: a limit given as null is removed.
pub(crate) async fn set_limits(
    conn: &mut AsyncMysqlConnection,
    params: QueueSetLimitsParams<'_>,
) -> Result<()> {
    CachedQuery::new(
        "INSERT INTO job_queues (name, paused, settings, created_at, updated_at)
         VALUES ($1, FALSE, JSON_MERGE_PATCH('{}', JSON_OBJECT('global_limit', $2, 'rate_allowed', $3, 'rate_period_secs', $4, 'per_key_limit', $5)),
                 UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
         ON DUPLICATE KEY UPDATE
         settings = JSON_MERGE_PATCH(settings, JSON_OBJECT('global_limit', $2, 'rate_allowed', $3, 'rate_period_secs', $4, 'per_key_limit', $5)),
         updated_at = UTC_TIMESTAMP(6)",
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
pub(crate) async fn settings(
    conn: &mut AsyncMysqlConnection,
    params: QueueSettingsParams<'_>,
) -> Result<Vec<QueueSettings>> {
    Ok(CachedQuery::new(
        "SELECT name AS queue, paused,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.concurrency')) AS SIGNED) AS concurrency,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.global_limit')) AS SIGNED) AS global_limit,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.per_key_limit')) AS SIGNED) AS per_key_limit,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_allowed')) AS SIGNED) AS rate_allowed,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_period_secs')) AS SIGNED) AS rate_period_secs
         FROM job_queues WHERE $1 IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(params.queue)
    .load(conn)
    .await?)
}
