//! Per-minute outcome counters, added up by each worker's completer and written about once
//! a second, so that the dashboard's throughput chart reads 60 small rows per queue instead
//! of counting the jobs table. Approximate by design: written after the outcomes, not in
//! their transaction, and lost if the worker dies before writing them.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::error::Result;
use crate::state::JobState;

const RECORD: &str = "\
INSERT INTO job_stats AS s (bucket, queue, state, count)
SELECT date_trunc('minute', b), q, st::job_state, n
FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::int8[]) AS u(b, q, st, n)
ON CONFLICT (bucket, queue, state) DO UPDATE SET count = s.count + EXCLUDED.count";

/// Adds `counts` (minute, queue, state, how many) to the counters; each time is truncated
/// to its minute.
pub async fn record<C>(conn: &mut C, counts: &[(DateTime<Utc>, &str, JobState, i64)]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    if counts.is_empty() {
        return Ok(());
    }
    let minutes: Vec<DateTime<Utc>> = counts.iter().map(|c| c.0).collect();
    let queues: Vec<&str> = counts.iter().map(|c| c.1).collect();
    let states: Vec<&str> = counts.iter().map(|c| c.2.as_str()).collect();
    let ns: Vec<i64> = counts.iter().map(|c| c.3).collect();
    diesel::sql_query(RECORD)
        .bind::<Array<Timestamptz>, _>(minutes)
        .bind::<Array<Text>, _>(queues)
        .bind::<Array<Text>, _>(states)
        .bind::<Array<BigInt>, _>(ns)
        .execute(conn)
        .await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Deletes counters older than `keep`. Returns how many rows went.
pub async fn prune<C>(conn: &mut C, keep: Duration, now: Option<DateTime<Utc>>) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let row: Count = diesel::sql_query(
        "WITH gone AS (DELETE FROM job_stats
                       WHERE bucket < COALESCE($2::timestamptz, now()) - $1 * interval '1 millisecond'
                       RETURNING 1)
         SELECT count(*) AS n FROM gone",
    )
    .bind::<BigInt, _>(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX))
    .bind::<Nullable<Timestamptz>, _>(now)
    .get_result(conn)
    .await?;
    Ok(row.n)
}
