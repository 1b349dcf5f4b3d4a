//! Per-minute outcome counters (`job_stats`), written by each worker's completer about once
//! a second and read by the dashboard's throughput chart. Approximate by design: written
//! after the outcomes, not in their transaction, and lost if the worker dies first.

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{BucketSum, Result, StatsCount, StatsPruneParams, StatsThroughputParams, Throughput};

use crate::rows::{Count, millis};

const RECORD: &str = "\
INSERT INTO job_stats AS s (bucket, queue, state, count)
SELECT date_trunc('minute', b), q, st::job_state, n
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::int8[]) AS u(b, q, st, n)
ON CONFLICT (bucket, queue, state) DO UPDATE SET count = s.count + EXCLUDED.count";

/// Adds `counts` to the counters; each time is truncated to its minute.
pub(crate) async fn record<C>(conn: &mut C, counts: &[StatsCount<'_>]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    if counts.is_empty() {
        return Ok(());
    }
    let minutes: Vec<DateTime<Utc>> = counts.iter().map(|c| c.minute).collect();
    let queues: Vec<&str> = counts.iter().map(|c| c.queue).collect();
    let states: Vec<&str> = counts.iter().map(|c| c.state.as_str()).collect();
    let ns: Vec<i64> = counts.iter().map(|c| c.count).collect();
    diesel::sql_query(RECORD)
        .bind::<Array<Timestamptz>, _>(minutes)
        .bind::<Array<Text>, _>(queues)
        .bind::<Array<Text>, _>(states)
        .bind::<Array<BigInt>, _>(ns)
        .execute(conn)
        .await?;
    Ok(())
}

/// See [`StatsPruneParams`].
pub(crate) async fn prune<C>(conn: &mut C, params: StatsPruneParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Count = diesel::sql_query(
        "WITH gone AS (DELETE FROM job_stats
                       WHERE bucket < COALESCE($2::timestamptz, now()) - $1 * interval '1 millisecond'
                       RETURNING 1)
         SELECT count(*) AS n FROM gone",
    )
    .bind::<BigInt, _>(millis(params.keep))
    .bind::<Nullable<Timestamptz>, _>(params.now)
    .get_result(conn)
    .await?;
    Ok(row.n)
}

// Whole steps since the first bucket, summed over queues: at most buckets × 4 rows back,
// from a range scan of the counters' primary key.
const THROUGHPUT: &str = "\
SELECT floor(extract(epoch FROM bucket - $1) / ($2 * 60))::int8 AS idx, state::text AS state, sum(count)::int8 AS n
FROM job_stats
WHERE bucket >= $1 AND bucket < $1 + $2 * $3 * interval '1 minute'
GROUP BY 1, 2";

/// See [`StatsThroughputParams`]: a read of the per-minute counters, whatever the size of
/// `jobs`.
pub(crate) async fn throughput<C>(conn: &mut C, params: StatsThroughputParams) -> Result<Vec<Throughput>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let first = params.first_bucket(params.now.unwrap_or_else(Utc::now));
    let rows: Vec<BucketSum> = diesel::sql_query(THROUGHPUT)
        .bind::<Timestamptz, _>(first)
        .bind::<BigInt, _>(params.step_minutes())
        .bind::<BigInt, _>(params.buckets())
        .load(conn)
        .await?;
    Ok(params.fill(first, rows))
}
