//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node and
//! its limits (global, per key and rate; claims obey them in `queue_limits`), and how much
//! of the limits is in use.

use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::rows::{Count, KeyLoadRow};
use jobs_driver::{
    LimitsUsage, QueueLimitsUsageParams, QueueSetConcurrencyParams, QueueSetLimitsParams, QueueSettings,
    QueueSettingsParams, RateWindow, Result,
};

use crate::cached::CachedQuery;
use crate::time::utc;

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

/// See [`QueueSetLimitsParams`]: the limits are removed, then the ones given set
/// (from an object built here that holds no null). MariaDB's `JSON_MERGE_PATCH` mishandles
/// a patch whose null removes a document's leading member: the patch's later members are
/// not looked for again, so `{"p":1,"g":1}` patched with `{"g":2,"p":null}` gives
/// `{"g":1}` (seen on 10.11; `limits_set_again_read_back_as_set` reaches it at its third
/// step).
pub(crate) async fn set_limits(
    conn: &mut AsyncMysqlConnection,
    params: QueueSetLimitsParams<'_>,
) -> Result<()> {
    let mut limits = serde_json::Map::new();
    let mut put = |name: &str, value: Option<i64>| {
        if let Some(v) = value {
            limits.insert(name.to_owned(), v.into());
        }
    };
    put("global_limit", params.global_limit.map(i64::from));
    put("rate_allowed", params.rate.map(|r| i64::from(r.allowed)));
    put("rate_period_secs", params.rate.map(|r| i64::from(r.period_secs)));
    put("per_key_limit", params.per_key_limit.map(i64::from));
    put("per_key_rate_allowed", params.per_key_rate.map(|r| i64::from(r.allowed)));
    put("per_key_rate_period_secs", params.per_key_rate.map(|r| i64::from(r.period_secs)));
    let limits = serde_json::Value::Object(limits).to_string();
    CachedQuery::new(
        "INSERT INTO job_queues (name, paused, settings, created_at, updated_at)
         VALUES ($1, FALSE, $2, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
         ON DUPLICATE KEY UPDATE
         settings = JSON_MERGE_PATCH(
             JSON_REMOVE(settings, '$.global_limit', '$.rate_allowed', '$.rate_period_secs', '$.per_key_limit',
                         '$.per_key_rate_allowed', '$.per_key_rate_period_secs'),
             $2),
         updated_at = UTC_TIMESTAMP(6)",
    )
    .bind::<Text, _>(params.queue)
    .bind::<Text, _>(&limits)
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
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_period_secs')) AS SIGNED) AS rate_period_secs,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.per_key_rate_allowed')) AS SIGNED) AS per_key_rate_allowed,
                CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.per_key_rate_period_secs')) AS SIGNED)
                    AS per_key_rate_period_secs
         FROM job_queues WHERE $1 IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(params.queue)
    .load(conn)
    .await?)
}

/// The running jobs per key (few: the queue's slots), the busiest `$3`, with the totals on
/// every row; their waiting jobs are counted by [`WAITING_OF_KEY`].
const KEY_LOADS: &str = "\
WITH r AS (
    SELECT partition_key AS pkey, COUNT(*) AS running
    FROM jobs WHERE queue = $1 AND state = 'running' GROUP BY partition_key
)
SELECT r.pkey AS `key`, r.running, CAST(NULL AS SIGNED) AS available, t.keys_running, t.keys_at_limit
FROM r CROSS JOIN (
    SELECT COUNT(*) AS keys_running, CAST(COALESCE(SUM(running >= $2), 0) AS SIGNED) AS keys_at_limit FROM r
) AS t
ORDER BY r.running DESC, r.pkey IS NOT NULL, r.pkey
LIMIT $3";

/// A key's available jobs, up to `$3`, through jobs_partition_idx.
const WAITING_OF_KEY: &str = "\
SELECT COUNT(*) AS n FROM (
    SELECT 1 FROM jobs WHERE queue = $1 AND state = 'available' AND partition_key = $2 LIMIT $3
) AS a";

#[derive(diesel::QueryableByName)]
struct RateRow {
    #[diesel(sql_type = Nullable<diesel::sql_types::Datetime>)]
    rate_window: Option<chrono::NaiveDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = BigInt)]
    used_up: i64,
}

/// See [`QueueLimitsUsageParams`].
pub(crate) async fn limits_usage(
    conn: &mut AsyncMysqlConnection,
    params: QueueLimitsUsageParams<'_>,
) -> Result<LimitsUsage> {
    let mut rows: Vec<KeyLoadRow> = CachedQuery::new(KEY_LOADS)
        .bind::<Text, _>(params.queue)
        .bind::<Nullable<BigInt>, _>(params.per_key_limit)
        .bind::<BigInt, _>(i64::try_from(params.top).unwrap_or(i64::MAX))
        .load(conn)
        .await?;
    for row in &mut rows {
        let Some(key) = row.key.as_deref() else { continue };
        let counted: Vec<Count> = CachedQuery::new(WAITING_OF_KEY)
            .bind::<Text, _>(params.queue)
            .bind::<Text, _>(key)
            .bind::<BigInt, _>(params.cap)
            .load(conn)
            .await?;
        row.available = counted.iter().map(|c| c.n).next();
    }
    let rate: Vec<RateRow> = CachedQuery::new(
        "SELECT rate_window, rate_counts,
                    (SELECT COUNT(*) FROM job_key_rates r
                     WHERE r.queue = $1 AND r.blocked_until > UTC_TIMESTAMP(6)) AS used_up
             FROM job_queues WHERE name = $1",
    )
    .bind::<Text, _>(params.queue)
    .load(conn)
    .await?;
    let used_up = rate.iter().map(|r| r.used_up).next().unwrap_or(0);
    let window = rate
        .into_iter()
        .next()
        .and_then(|r| RateWindow::decode(r.rate_window.map(utc), r.rate_counts.as_deref()));
    Ok(LimitsUsage { keys_rate_used_up: used_up, ..LimitsUsage::from_rows(rows, window) })
}
