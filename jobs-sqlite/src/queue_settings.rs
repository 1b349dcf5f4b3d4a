//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node and
//! its limits (global and rate; claims obey them in `queue_limits`).

use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::{QueueSettings, Result};

use crate::cached::CachedQuery;

/// Sets (or, with `None`, removes) `queue`'s concurrency.
pub(crate) fn set_concurrency(
    conn: &mut SqliteConnection,
    queue: &str,
    concurrency: Option<i32>,
    now_ms: i64,
) -> Result<()> {
    CachedQuery::new(
        "INSERT INTO job_queues (name, settings, created_at, updated_at)
         VALUES ($1, CASE WHEN $2 IS NULL THEN '{}' ELSE json_object('concurrency', $2) END, $3, $3)
         ON CONFLICT (name) DO UPDATE
         SET settings = CASE WHEN $2 IS NULL THEN json_remove(settings, '$.concurrency')
                             ELSE json_set(settings, '$.concurrency', $2) END,
             updated_at = $3",
    )
    .bind::<Text, _>(queue)
    .bind::<Nullable<Integer>, _>(concurrency)
    .bind::<BigInt, _>(now_ms)
    .execute(conn)?;
    Ok(())
}

/// Sets `queue`'s limits (see `QueueSetLimitsParams`): a merge patch, so a limit given as
/// null is removed.
pub(crate) fn set_limits(
    conn: &mut SqliteConnection,
    queue: &str,
    global_limit: Option<i32>,
    per_key_limit: Option<i32>,
    rate: Option<jobs_driver::RateLimit>,
    now_ms: i64,
) -> Result<()> {
    CachedQuery::new(
        "INSERT INTO job_queues (name, settings, created_at, updated_at)
         VALUES ($1, json_patch('{}', json_object('global_limit', $2, 'rate_allowed', $3, 'rate_period_secs', $4, 'per_key_limit', $6)), $5, $5)
         ON CONFLICT (name) DO UPDATE
         SET settings = json_patch(settings, json_object('global_limit', $2, 'rate_allowed', $3, 'rate_period_secs', $4, 'per_key_limit', $6)),
             updated_at = $5",
    )
    .bind::<Text, _>(queue)
    .bind::<Nullable<Integer>, _>(global_limit)
    .bind::<Nullable<BigInt>, _>(rate.map(|r| i64::from(r.allowed)))
    .bind::<Nullable<BigInt>, _>(rate.map(|r| i64::from(r.period_secs)))
    .bind::<BigInt, _>(now_ms)
    .bind::<Nullable<Integer>, _>(per_key_limit)
    .execute(conn)?;
    Ok(())
}

/// One queue's stored settings, or every queue's.
pub(crate) fn settings(conn: &mut SqliteConnection, queue: Option<&str>) -> Result<Vec<QueueSettings>> {
    Ok(CachedQuery::new(
        "SELECT name AS queue, paused, json_extract(settings, '$.concurrency') AS concurrency,
                json_extract(settings, '$.global_limit') AS global_limit,
                json_extract(settings, '$.per_key_limit') AS per_key_limit,
                json_extract(settings, '$.rate_allowed') AS rate_allowed,
                json_extract(settings, '$.rate_period_secs') AS rate_period_secs
         FROM job_queues
         WHERE $1 IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(queue)
    .load(conn)?)
}
