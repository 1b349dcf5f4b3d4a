//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node.

use diesel::sql_types::{Integer, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{QueueSetConcurrencyParams, QueueSettings, QueueSettingsParams, Result};

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

/// See [`QueueSettingsParams`].
pub(crate) async fn settings(
    conn: &mut AsyncMysqlConnection,
    params: QueueSettingsParams<'_>,
) -> Result<Vec<QueueSettings>> {
    Ok(CachedQuery::new(
        "SELECT name AS queue, paused,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.concurrency')) AS SIGNED) AS concurrency
         FROM job_queues WHERE $1 IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(params.queue)
    .load(conn)
    .await?)
}
