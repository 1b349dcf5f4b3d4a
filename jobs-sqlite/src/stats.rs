//! Per-minute outcome counters (`job_stats`), written by each worker's completer about once
//! a second and read by the dashboard's throughput chart. Approximate by design: written
//! after the outcomes, not in their transaction, and lost if the worker dies first.

use chrono::Utc;
use diesel::sql_types::{BigInt, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::{BucketSum, Result, StatsCount, StatsThroughputParams, Throughput};

use crate::cached::CachedQuery;
use crate::time::to_ms;

const MINUTE_MS: i64 = 60_000;

const RECORD: &str = "\
INSERT INTO job_stats (bucket, queue, state, count) VALUES ($1, $2, $3, $4)
ON CONFLICT (bucket, queue, state) DO UPDATE SET count = job_stats.count + excluded.count";

/// One counter to add, owned (to move onto the connection's thread).
pub(crate) struct Counted {
    minute_ms: i64,
    queue: String,
    state: &'static str,
    count: i64,
}

/// The counters of `counts`, each time truncated to its minute.
pub(crate) fn counted(counts: &[StatsCount<'_>]) -> Vec<Counted> {
    counts
        .iter()
        .map(|c| {
            let ms = to_ms(c.minute);
            Counted {
                minute_ms: ms - ms.rem_euclid(MINUTE_MS),
                queue: c.queue.to_owned(),
                state: c.state.as_str(),
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
            .bind::<Text, _>(&c.queue)
            .bind::<Text, _>(c.state)
            .bind::<BigInt, _>(c.count)
            .execute(conn)?;
    }
    Ok(())
}

/// Deletes counters (per queue and per kind) older than `keep_ms` before `now_ms`. Returns
/// how many rows went.
pub(crate) fn prune(conn: &mut SqliteConnection, keep_ms: i64, now_ms: i64) -> Result<i64> {
    let mut total = 0;
    for sql in ["DELETE FROM job_stats WHERE bucket < $1", "DELETE FROM job_kind_stats WHERE bucket < $1"] {
        let n = CachedQuery::new(sql).bind::<BigInt, _>(now_ms.saturating_sub(keep_ms)).execute(conn)?;
        total += n as i64;
    }
    Ok(total)
}

/// See [`StatsThroughputParams`]: whole steps since the first bucket, summed over queues.
pub(crate) fn throughput(
    conn: &mut SqliteConnection,
    params: StatsThroughputParams,
) -> Result<Vec<Throughput>> {
    let first = params.first_bucket(params.now.unwrap_or_else(Utc::now));
    let step_ms = params.step_minutes() * MINUTE_MS;
    let first_ms = to_ms(first);
    let rows: Vec<BucketSum> = CachedQuery::new(
        "SELECT (bucket - $1) / $2 AS idx, state, sum(count) AS n FROM job_stats
         WHERE bucket >= $1 AND bucket < $1 + $2 * $3 GROUP BY 1, 2",
    )
    .bind::<BigInt, _>(first_ms)
    .bind::<BigInt, _>(step_ms)
    .bind::<BigInt, _>(params.buckets())
    .load(conn)?;
    Ok(params.fill(first, rows))
}
