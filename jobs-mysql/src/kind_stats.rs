//! Per-kind counters by minute (`job_kind_stats`): outcomes, and how long attempts ran and
//! waited as histograms, for the dashboard's kinds page. Written with `job_stats`, pruned
//! with it, as approximate as it is.

use chrono::{DurationRound, TimeDelta};
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{KindStats, KindStatsCount, KindStatsSum, Result, StatsKindsParams};

use crate::cached::CachedQuery;
use crate::time::{micros, naive, naive_opt};

const RECORD: &str = "\
INSERT INTO job_kind_stats (bucket, kind, metric, idx, count)
SELECT c.bucket, c.kind, c.metric, c.idx, c.n
FROM JSON_TABLE($1, '$[*]' COLUMNS (bucket DATETIME(6) PATH '$[0]', kind VARCHAR(255) PATH '$[1]',
                                    metric VARCHAR(16) PATH '$[2]', idx SMALLINT PATH '$[3]',
                                    n BIGINT PATH '$[4]')) AS c
ON DUPLICATE KEY UPDATE count = job_kind_stats.count + c.n";

/// Adds `counts` to the counters, in one statement.
pub(crate) async fn record(conn: &mut AsyncMysqlConnection, counts: &[KindStatsCount<'_>]) -> Result<()> {
    if counts.is_empty() {
        return Ok(());
    }
    let rows: Vec<serde_json::Value> = counts
        .iter()
        .map(|c| {
            let minute = c.minute.duration_trunc(TimeDelta::minutes(1)).unwrap_or(c.minute);
            let bucket = naive(minute).format("%Y-%m-%d %H:%M:%S").to_string();
            serde_json::json!([bucket, c.kind, c.metric.as_str(), c.idx, c.count])
        })
        .collect();
    CachedQuery::new(RECORD)
        .bind::<Text, _>(serde_json::Value::Array(rows).to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// Rolls minute rows up into their hour's rows (per-queue ones older than `params.older_than`, per-kind ones older than `params.kinds_older_than`), both tables
/// in one transaction. Returns how many minute rows went.
pub(crate) async fn compact(
    conn: &mut AsyncMysqlConnection,
    params: jobs_driver::StatsCompactParams,
) -> Result<i64> {
    use diesel_async::AsyncConnection;
    conn.transaction::<i64, jobs_driver::DriverError, _>(async |tx| {
        let mut total = 0;
        for (table, key, older_than) in [
            ("job_stats", "queue, state", params.older_than),
            ("job_kind_stats", "kind, metric, idx", params.kinds_older_than),
        ] {
            let old = "bucket < COALESCE(?, UTC_TIMESTAMP(6)) - INTERVAL ? MICROSECOND \
                       AND bucket <> DATE_FORMAT(bucket, '%Y-%m-%d %H:00:00')";
            diesel::sql_query(format!(
                "INSERT INTO {table} (bucket, {key}, count)
                 SELECT * FROM (SELECT DATE_FORMAT(bucket, '%Y-%m-%d %H:00:00') AS hour, {key}, SUM(count) AS n
                                FROM {table} WHERE {old} GROUP BY hour, {key}) AS rolled
                 ON DUPLICATE KEY UPDATE count = {table}.count + rolled.n"
            ))
            .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
            .bind::<BigInt, _>(micros(older_than))
            .execute(tx)
            .await?;
            let n = diesel::sql_query(format!("DELETE FROM {table} WHERE {old}"))
                .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
                .bind::<BigInt, _>(micros(older_than))
                .execute(tx)
                .await?;
            total += n as i64;
        }
        Ok(total)
    })
    .await
}

/// See [`StatsKindsParams`]: the window's counters summed per kind, metric and bucket.
pub(crate) async fn kinds(
    conn: &mut AsyncMysqlConnection,
    params: StatsKindsParams,
) -> Result<Vec<KindStats>> {
    let since = params.since();
    let since = since.duration_trunc(TimeDelta::minutes(1)).unwrap_or(since);
    // An hour of minutes is read by time (the primary key's range, then grouped); a day or
    // a week by series (`job_kind_stats_series_idx`, every row of it, grouped as it
    // streams): 0.11 s for a week of 120 busy kinds at 1 M jobs on MariaDB, against 0.37 s
    // by time, where the optimizer would choose the range.
    let sql = if params.window > std::time::Duration::from_secs(3600) {
        "SELECT kind, metric, CAST(idx AS SIGNED) AS idx, CAST(SUM(count) AS SIGNED) AS n
         FROM job_kind_stats FORCE INDEX (job_kind_stats_series_idx)
         WHERE bucket >= $1 GROUP BY kind, metric, idx"
    } else {
        "SELECT kind, metric, CAST(idx AS SIGNED) AS idx, CAST(SUM(count) AS SIGNED) AS n FROM job_kind_stats
         WHERE bucket >= $1 GROUP BY kind, metric, idx"
    };
    let rows: Vec<KindStatsSum> = CachedQuery::new(sql).bind::<Datetime, _>(naive(since)).load(conn).await?;
    Ok(KindStats::fold(rows))
}
