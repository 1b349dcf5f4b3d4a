//! Per-minute outcome counters (`job_stats`), written by each worker's completer about once
//! a second and read by the dashboard's throughput chart. Approximate by design: written
//! after the outcomes, not in their transaction, and lost if the worker dies first.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{BucketSum, Result, StatsCount, StatsPruneParams, StatsThroughputParams, Throughput};

use crate::cached::CachedQuery;
use crate::time::{micros, naive, naive_opt};

const RECORD: &str = "\
INSERT INTO job_stats (bucket, queue, state, count)
SELECT c.bucket, c.queue, c.state, c.n
FROM JSON_TABLE($1, '$[*]' COLUMNS (bucket DATETIME(6) PATH '$[0]', queue VARCHAR(255) PATH '$[1]',
                                    state VARCHAR(16) PATH '$[2]', n BIGINT PATH '$[3]')) AS c
ON DUPLICATE KEY UPDATE count = job_stats.count + c.n";

/// A minute as `job_stats.bucket` holds it.
fn minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::minutes(1)).unwrap_or(t)
}

/// Adds `counts` to the counters, in one statement.
pub(crate) async fn record(conn: &mut AsyncMysqlConnection, counts: &[StatsCount<'_>]) -> Result<()> {
    if counts.is_empty() {
        return Ok(());
    }
    let rows: Vec<serde_json::Value> = counts
        .iter()
        .map(|c| {
            let bucket = naive(minute(c.minute)).format("%Y-%m-%d %H:%M:%S").to_string();
            serde_json::json!([bucket, c.queue, c.state.as_str(), c.count])
        })
        .collect();
    CachedQuery::new(RECORD)
        .bind::<Text, _>(serde_json::Value::Array(rows).to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// See [`StatsPruneParams`]: the per-queue and the per-kind counters.
pub(crate) async fn prune(conn: &mut AsyncMysqlConnection, params: StatsPruneParams) -> Result<i64> {
    let mut total = 0;
    for sql in [
        "DELETE FROM job_stats WHERE bucket < COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $2 MICROSECOND",
        "DELETE FROM job_kind_stats WHERE bucket < COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $2 MICROSECOND",
    ] {
        let n = CachedQuery::new(sql)
            .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
            .bind::<BigInt, _>(micros(params.keep))
            .execute(conn)
            .await?;
        total += n as i64;
    }
    Ok(total)
}

/// See [`StatsThroughputParams`]: whole steps since the first bucket, summed over queues.
pub(crate) async fn throughput(
    conn: &mut AsyncMysqlConnection,
    params: StatsThroughputParams,
) -> Result<Vec<Throughput>> {
    let first = params.first_bucket(params.now.unwrap_or_else(Utc::now));
    let step = params.step_minutes();
    let rows: Vec<BucketSum> = CachedQuery::new(
        "SELECT CAST(FLOOR(TIMESTAMPDIFF(MINUTE, $1, bucket) / $2) AS SIGNED) AS idx, state,
                CAST(SUM(count) AS SIGNED) AS n
         FROM job_stats
         WHERE bucket >= $1 AND bucket < $1 + INTERVAL ($2 * $3) MINUTE
         GROUP BY idx, state",
    )
    .bind::<Datetime, _>(naive(first))
    .bind::<BigInt, _>(step)
    .bind::<BigInt, _>(params.buckets())
    .load(conn)
    .await?;
    Ok(params.fill(first, rows))
}
