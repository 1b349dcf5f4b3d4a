//! Per-minute outcome counters (`job_stats`), written by each worker's completer about once
//! a second and read by the dashboard's throughput chart. Approximate by design: written
//! after the outcomes, not in their transaction, and lost if the worker dies first.

use chrono::{DateTime, DurationRound, NaiveDateTime, TimeDelta, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{Result, StatsCount, StatsPruneParams, Throughput};

use crate::cached::CachedQuery;
use crate::time::{micros, naive, naive_opt, utc};

const RECORD: &str = "\
INSERT INTO job_stats (bucket, queue, state, count)
SELECT c.bucket, c.queue, c.state, c.n
FROM JSON_TABLE($1, '$[*]' COLUMNS (bucket DATETIME(6) PATH '$[0]', queue VARCHAR(255) PATH '$[1]',
                                    state VARCHAR(16) PATH '$[2]', n BIGINT PATH '$[3]')) AS c
ON DUPLICATE KEY UPDATE count = job_stats.count + VALUES(count)";

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

/// See [`StatsPruneParams`].
pub(crate) async fn prune(conn: &mut AsyncMysqlConnection, params: StatsPruneParams) -> Result<i64> {
    let n = CachedQuery::new(
        "DELETE FROM job_stats WHERE bucket < COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $2 MICROSECOND",
    )
    .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
    .bind::<BigInt, _>(micros(params.keep))
    .execute(conn)
    .await?;
    Ok(n as i64)
}

#[derive(QueryableByName)]
struct MinuteRow {
    #[diesel(sql_type = Datetime)]
    bucket: NaiveDateTime,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Outcomes per minute over the hour before now: 60 entries, oldest first.
pub(crate) async fn throughput(conn: &mut AsyncMysqlConnection) -> Result<Vec<Throughput>> {
    let last = minute(Utc::now());
    let first = last - TimeDelta::minutes(59);
    let rows: Vec<MinuteRow> = CachedQuery::new(
        "SELECT bucket, state, CAST(SUM(count) AS SIGNED) AS n FROM job_stats WHERE bucket >= $1 GROUP BY bucket, state",
    )
    .bind::<Datetime, _>(naive(first))
    .load(conn)
    .await?;
    let mut minutes: Vec<Throughput> = (0..60)
        .map(|i| Throughput {
            minute: first + TimeDelta::minutes(i),
            completed: 0,
            retried: 0,
            discarded: 0,
            cancelled: 0,
        })
        .collect();
    for row in rows {
        let index = (utc(row.bucket) - first).num_minutes();
        let Some(minute) = usize::try_from(index).ok().and_then(|i| minutes.get_mut(i)) else { continue };
        match row.state.as_str() {
            "completed" => minute.completed += row.n,
            "retryable" => minute.retried += row.n,
            "discarded" => minute.discarded += row.n,
            "cancelled" => minute.cancelled += row.n,
            _ => {}
        }
    }
    Ok(minutes)
}
