//! A queue's cluster-wide settings in `job_queues.settings`: its concurrency per node and
//! its limits (global, per key and rate; claims obey them in `queue_limits`), and how much
//! of the limits is in use.

use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::rows::{Count, KeyLoadRow};
use jobs_driver::{LimitsUsage, QueueSettings, RateWindow, Result};

use crate::cached::CachedQuery;
use crate::time::from_ms;

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
    per_key_rate: Option<jobs_driver::RateLimit>,
    now_ms: i64,
) -> Result<()> {
    CachedQuery::new(
        "INSERT INTO job_queues (name, settings, created_at, updated_at)
         VALUES ($1, json_patch('{}', json_object('global_limit', $2, 'rate_allowed', $3, 'rate_period_secs', $4,
                                                  'per_key_limit', $6, 'per_key_rate_allowed', $7,
                                                  'per_key_rate_period_secs', $8)), $5, $5)
         ON CONFLICT (name) DO UPDATE
         SET settings = json_patch(settings, json_object('global_limit', $2, 'rate_allowed', $3, 'rate_period_secs', $4,
                                                         'per_key_limit', $6, 'per_key_rate_allowed', $7,
                                                         'per_key_rate_period_secs', $8)),
             updated_at = $5",
    )
    .bind::<Text, _>(queue)
    .bind::<Nullable<Integer>, _>(global_limit)
    .bind::<Nullable<BigInt>, _>(rate.map(|r| i64::from(r.allowed)))
    .bind::<Nullable<BigInt>, _>(rate.map(|r| i64::from(r.period_secs)))
    .bind::<BigInt, _>(now_ms)
    .bind::<Nullable<Integer>, _>(per_key_limit)
    .bind::<Nullable<BigInt>, _>(per_key_rate.map(|r| i64::from(r.allowed)))
    .bind::<Nullable<BigInt>, _>(per_key_rate.map(|r| i64::from(r.period_secs)))
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
                json_extract(settings, '$.rate_period_secs') AS rate_period_secs,
                json_extract(settings, '$.per_key_rate_allowed') AS per_key_rate_allowed,
                json_extract(settings, '$.per_key_rate_period_secs') AS per_key_rate_period_secs
         FROM job_queues
         WHERE $1 IS NULL OR name = $1 ORDER BY name",
    )
    .bind::<Nullable<Text>, _>(queue)
    .load(conn)?)
}

/// The running jobs per key (few: the queue's slots), the busiest `$3`, with the totals on
/// every row; their waiting jobs are counted by [`WAITING_OF_KEY`].
const KEY_LOADS: &str = "\
WITH r AS (
    SELECT json_extract(meta, '$._partition_key') AS key, count(*) AS running
    FROM jobs WHERE queue = $1 AND state = 'running' GROUP BY 1
)
SELECT r.key, r.running, NULL AS available,
       (SELECT count(*) FROM r) AS keys_running,
       (SELECT count(*) FROM r WHERE running >= $2) AS keys_at_limit
FROM r ORDER BY r.running DESC, r.key IS NOT NULL, r.key
LIMIT $3";

/// A key's available jobs, up to `$3`, through jobs_partition_idx.
const WAITING_OF_KEY: &str = "\
SELECT count(*) AS n FROM (
    SELECT 1 FROM jobs
    WHERE queue = $1 AND state = 'available' AND json_extract(meta, '$._partition_key') IS NOT NULL
      AND json_extract(meta, '$._partition_key') = $2
    LIMIT $3
)";

#[derive(diesel::QueryableByName)]
struct RateRow {
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_window: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = BigInt)]
    used_up: i64,
}

/// See [`QueueLimitsUsageParams`](jobs_driver::QueueLimitsUsageParams).
pub(crate) fn limits_usage(
    conn: &mut SqliteConnection,
    queue: &str,
    per_key_limit: Option<i64>,
    top: usize,
    cap: i64,
    now_ms: i64,
) -> Result<LimitsUsage> {
    let mut rows: Vec<KeyLoadRow> = CachedQuery::new(KEY_LOADS)
        .bind::<Text, _>(queue)
        .bind::<Nullable<BigInt>, _>(per_key_limit)
        .bind::<BigInt, _>(i64::try_from(top).unwrap_or(i64::MAX))
        .load(conn)?;
    for row in &mut rows {
        let Some(key) = row.key.as_deref() else { continue };
        let counted: Vec<Count> = CachedQuery::new(WAITING_OF_KEY)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(key)
            .bind::<BigInt, _>(cap)
            .load(conn)?;
        row.available = counted.iter().map(|c| c.n).next();
    }
    let rate: Vec<RateRow> = CachedQuery::new(
        "SELECT rate_window, rate_counts,
                    (SELECT count(*) FROM job_key_rates r
                     WHERE r.queue = $1 AND r.blocked_until IS NOT NULL AND r.blocked_until > $2) AS used_up
             FROM job_queues WHERE name = $1",
    )
    .bind::<Text, _>(queue)
    .bind::<BigInt, _>(now_ms)
    .load(conn)?;
    let used_up = rate.iter().map(|r| r.used_up).next().unwrap_or(0);
    let window = rate
        .into_iter()
        .next()
        .and_then(|r| RateWindow::decode(r.rate_window.map(from_ms), r.rate_counts.as_deref()));
    Ok(LimitsUsage { keys_rate_used_up: used_up, ..LimitsUsage::from_rows(rows, window) })
}
