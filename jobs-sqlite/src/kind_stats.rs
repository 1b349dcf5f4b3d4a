//! Per-kind counters by minute (`job_kind_stats`): outcomes, and how long attempts ran and
//! waited as histograms, for the dashboard's kinds page. Written with `job_stats`, pruned
//! with it, as approximate as it is.

use diesel::sql_types::{BigInt, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::{KindStats, KindStatsCount, KindStatsSum, Result, StatsKindsParams};

use crate::cached::CachedQuery;
use crate::time::to_ms;

const MINUTE_MS: i64 = 60_000;

const RECORD: &str = "\
INSERT INTO job_kind_stats (bucket, kind, metric, idx, count) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (bucket, kind, metric, idx) DO UPDATE SET count = job_kind_stats.count + excluded.count";

/// One counter to add, owned (to move onto the connection's thread).
pub(crate) struct Counted {
    minute_ms: i64,
    kind: String,
    metric: &'static str,
    idx: i64,
    count: i64,
}

/// The counters of `counts`, each time truncated to its minute.
pub(crate) fn counted(counts: &[KindStatsCount<'_>]) -> Vec<Counted> {
    counts
        .iter()
        .map(|c| {
            let ms = to_ms(c.minute);
            Counted {
                minute_ms: ms - ms.rem_euclid(MINUTE_MS),
                kind: c.kind.to_owned(),
                metric: c.metric.as_str(),
                idx: i64::from(c.idx),
                count: c.count,
            }
        })
        .collect()
}

/// Adds `counts` to the counters, in the caller's transaction.
pub(crate) fn record(conn: &mut SqliteConnection, counts: &[Counted]) -> Result<()> {
    for c in counts {
        CachedQuery::new(RECORD)
            .bind::<BigInt, _>(c.minute_ms)
            .bind::<Text, _>(&c.kind)
            .bind::<Text, _>(c.metric)
            .bind::<BigInt, _>(c.idx)
            .bind::<BigInt, _>(c.count)
            .execute(conn)?;
    }
    Ok(())
}

const HOUR_MS: i64 = 3_600_000;

/// Rolls minute rows up into their hour's rows: per-queue ones before `queues_ms`, per-kind
/// ones before `kinds_ms`, in the caller's transaction. Returns how many minute rows went.
pub(crate) fn compact(conn: &mut SqliteConnection, queues_ms: i64, kinds_ms: i64) -> Result<i64> {
    let mut total = 0;
    for (table, key, cutoff_ms) in
        [("job_stats", "queue, state", queues_ms), ("job_kind_stats", "kind, metric, idx", kinds_ms)]
    {
        diesel::sql_query(format!(
            "INSERT INTO {table} (bucket, {key}, count)
             SELECT bucket - bucket % {HOUR_MS}, {key}, sum(count) FROM {table}
             WHERE bucket < ?1 AND bucket % {HOUR_MS} <> 0 GROUP BY 1, {key}
             ON CONFLICT DO UPDATE SET count = {table}.count + excluded.count"
        ))
        .bind::<BigInt, _>(cutoff_ms)
        .execute(conn)?;
        let n =
            diesel::sql_query(format!("DELETE FROM {table} WHERE bucket < ?1 AND bucket % {HOUR_MS} <> 0"))
                .bind::<BigInt, _>(cutoff_ms)
                .execute(conn)?;
        total += n as i64;
    }
    Ok(total)
}

/// See [`StatsKindsParams`]: the window's counters summed per kind, metric and bucket.
pub(crate) fn kinds(conn: &mut SqliteConnection, params: StatsKindsParams) -> Result<Vec<KindStats>> {
    let since = to_ms(params.since());
    // An hour of minutes is read by time (the primary key's range, then sorted into
    // groups); a day or a week by series (`job_kind_stats_series_idx`, every row of it,
    // grouped as it streams, where sorting a week of 120 busy kinds took 0.3 s at 1 M jobs).
    let sql = if params.window > std::time::Duration::from_secs(3600) {
        "SELECT kind, metric, idx, sum(count) AS n FROM job_kind_stats INDEXED BY job_kind_stats_series_idx
         WHERE bucket >= $1 GROUP BY kind, metric, idx"
    } else {
        "SELECT kind, metric, idx, sum(count) AS n FROM job_kind_stats WHERE bucket >= $1 GROUP BY kind, metric, idx"
    };
    let rows: Vec<KindStatsSum> =
        CachedQuery::new(sql).bind::<BigInt, _>(since - since.rem_euclid(MINUTE_MS)).load(conn)?;
    Ok(KindStats::fold(rows))
}
