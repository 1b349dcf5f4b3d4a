//! Per-kind counters by minute (`job_kind_stats`): outcomes, and how long attempts ran and
//! waited as histograms, for the dashboard's kinds page. Written with `job_stats`, pruned
//! with it, as approximate as it is.

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Int2, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{KindStats, KindStatsCount, KindStatsSum, Result, StatsKindsParams, StatsPruneParams};

use crate::rows::millis;

const RECORD: &str = "\
INSERT INTO job_kind_stats AS s (bucket, kind, metric, idx, count)
SELECT date_trunc('minute', b), k, m, i, n
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::int2[], $5::int8[]) AS u(b, k, m, i, n)
ON CONFLICT (bucket, kind, metric, idx) DO UPDATE SET count = s.count + EXCLUDED.count";

/// Adds `counts` to the counters, in one statement; each time is truncated to its minute.
pub(crate) async fn record<C>(conn: &mut C, counts: &[KindStatsCount<'_>]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    if counts.is_empty() {
        return Ok(());
    }
    let minutes: Vec<DateTime<Utc>> = counts.iter().map(|c| c.minute).collect();
    let kinds: Vec<&str> = counts.iter().map(|c| c.kind).collect();
    let metrics: Vec<&str> = counts.iter().map(|c| c.metric.as_str()).collect();
    let idx: Vec<i16> = counts.iter().map(|c| c.idx).collect();
    let ns: Vec<i64> = counts.iter().map(|c| c.count).collect();
    diesel::sql_query(RECORD)
        .bind::<Array<Timestamptz>, _>(minutes)
        .bind::<Array<Text>, _>(kinds)
        .bind::<Array<Text>, _>(metrics)
        .bind::<Array<Int2>, _>(idx)
        .bind::<Array<BigInt>, _>(ns)
        .execute(conn)
        .await?;
    Ok(())
}

/// Adds both the per-queue and the per-kind counters, in one transaction: a failed write
/// is retried whole, never counted twice.
pub(crate) async fn record_with_queues(
    conn: &mut diesel_async::AsyncPgConnection,
    params: jobs_driver::StatsRecordParams<'_>,
) -> Result<()> {
    use diesel_async::AsyncConnection;
    conn.transaction::<(), jobs_driver::DriverError, _>(async |tx| {
        crate::stats::record(tx, params.counts).await?;
        record(tx, params.kinds).await
    })
    .await
}

// Minute rows before the cutoff move into their hour's row: one statement per table.
const COMPACT_KINDS: &str = "\
WITH old AS (
    DELETE FROM job_kind_stats
    WHERE bucket < COALESCE($2::timestamptz, now()) - $1 * interval '1 millisecond'
      AND bucket <> date_trunc('hour', bucket)
    RETURNING bucket, kind, metric, idx, count
), rolled AS (
    INSERT INTO job_kind_stats AS s (bucket, kind, metric, idx, count)
    SELECT date_trunc('hour', bucket), kind, metric, idx, sum(count) FROM old GROUP BY 1, 2, 3, 4
    ON CONFLICT (bucket, kind, metric, idx) DO UPDATE SET count = s.count + EXCLUDED.count
)
SELECT count(*) AS n FROM old";

const COMPACT_QUEUES: &str = "\
WITH old AS (
    DELETE FROM job_stats
    WHERE bucket < COALESCE($2::timestamptz, now()) - $1 * interval '1 millisecond'
      AND bucket <> date_trunc('hour', bucket)
    RETURNING bucket, queue, state, count
), rolled AS (
    INSERT INTO job_stats AS s (bucket, queue, state, count)
    SELECT date_trunc('hour', bucket), queue, state, sum(count) FROM old GROUP BY 1, 2, 3
    ON CONFLICT (bucket, queue, state) DO UPDATE SET count = s.count + EXCLUDED.count
)
SELECT count(*) AS n FROM old";

/// See [`StatsCompactParams`](jobs_driver::StatsCompactParams): both tables, in one
/// transaction.
pub(crate) async fn compact(
    conn: &mut diesel_async::AsyncPgConnection,
    params: jobs_driver::StatsCompactParams,
) -> Result<i64> {
    use diesel_async::AsyncConnection;
    conn.transaction::<i64, jobs_driver::DriverError, _>(async |tx| {
        let mut total = 0;
        for (sql, older_than) in
            [(COMPACT_QUEUES, params.older_than), (COMPACT_KINDS, params.kinds_older_than)]
        {
            let row: crate::rows::Count = diesel::sql_query(sql)
                .bind::<BigInt, _>(millis(older_than))
                .bind::<Nullable<Timestamptz>, _>(params.now)
                .get_result(tx)
                .await?;
            total += row.n;
        }
        Ok(total)
    })
    .await
}

/// Deletes counters older than `keep`. Returns how many rows went.
pub(crate) async fn prune<C>(conn: &mut C, params: StatsPruneParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let n = diesel::sql_query(
        "DELETE FROM job_kind_stats WHERE bucket < COALESCE($2::timestamptz, now()) - $1 * interval '1 millisecond'",
    )
    .bind::<BigInt, _>(millis(params.keep))
    .bind::<Nullable<Timestamptz>, _>(params.now)
    .execute(conn)
    .await?;
    Ok(n as i64)
}

/// See [`StatsKindsParams`]: the window's counters summed per kind, metric and bucket.
pub(crate) async fn kinds<C>(conn: &mut C, params: StatsKindsParams) -> Result<Vec<KindStats>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<KindStatsSum> = diesel::sql_query(
        "SELECT kind, metric, idx::int8 AS idx, sum(count)::int8 AS n FROM job_kind_stats
         WHERE bucket >= date_trunc('minute', $1::timestamptz) GROUP BY kind, metric, idx",
    )
    .bind::<Timestamptz, _>(params.since())
    .load(conn)
    .await?;
    Ok(KindStats::fold(rows))
}
