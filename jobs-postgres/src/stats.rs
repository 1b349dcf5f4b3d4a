//! Per-minute outcome counters (`job_stats`), written by each worker's completer about once
//! a second and read by the dashboard's throughput chart. Approximate by design: written
//! after the outcomes, not in their transaction, and lost if the worker dies first.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Result, StatsCount, StatsPruneParams, Throughput};

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

#[derive(QueryableByName)]
struct MinuteRow {
    #[diesel(sql_type = Timestamptz)]
    minute: DateTime<Utc>,
    #[diesel(sql_type = BigInt)]
    completed: i64,
    #[diesel(sql_type = BigInt)]
    retried: i64,
    #[diesel(sql_type = BigInt)]
    discarded: i64,
    #[diesel(sql_type = BigInt)]
    cancelled: i64,
}

const THROUGHPUT: &str = "\
SELECT m.minute,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'completed'), 0)::int8 AS completed,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'retryable'), 0)::int8 AS retried,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'discarded'), 0)::int8 AS discarded,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'cancelled'), 0)::int8 AS cancelled
FROM generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()),
                     interval '1 minute') AS m(minute)
LEFT JOIN job_stats s ON s.bucket = m.minute
GROUP BY m.minute
ORDER BY m.minute";

/// Outcomes per minute over the last hour: 60 small reads, whatever the size of `jobs`.
pub(crate) async fn throughput<C>(conn: &mut C) -> Result<Vec<Throughput>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<MinuteRow> = diesel::sql_query(THROUGHPUT).load(conn).await?;
    Ok(rows
        .into_iter()
        .map(|r| Throughput {
            minute: r.minute,
            completed: r.completed,
            retried: r.retried,
            discarded: r.discarded,
            cancelled: r.cancelled,
        })
        .collect())
}
