//! A queue's rate usage per partition key, in `job_key_rates`: the statements a limited
//! claim runs under the queue's lock ([`jobs_driver::partition`], "A rate per key").

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_driver::Result;
use jobs_driver::partition::KeyRate;
use jobs_driver::rows::Count;

use crate::cached::CachedQuery;

const BLOCKED: &str = "\
SELECT count(*) AS n FROM job_key_rates
WHERE queue = $1 AND blocked_until IS NOT NULL AND blocked_until > $2";

const READ: &str = "\
SELECT key, window_start, counts, blocked_until FROM job_key_rates
WHERE queue = $1 AND key = ANY ($2)";

const WRITE: &str = "\
INSERT INTO job_key_rates AS r (queue, key, window_start, counts, blocked_until)
SELECT $1, s.key, s.window_start, s.counts, s.blocked_until
FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::timestamptz[])
     AS s(key, window_start, counts, blocked_until)
ON CONFLICT (queue, key) DO UPDATE
SET window_start = EXCLUDED.window_start, counts = EXCLUDED.counts,
    blocked_until = EXCLUDED.blocked_until";

const FORGET: &str = "DELETE FROM job_key_rates WHERE queue = $1 AND window_start < $2";

#[derive(diesel::QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    key: String,
    #[diesel(sql_type = Timestamptz)]
    window_start: DateTime<Utc>,
    #[diesel(sql_type = Text)]
    counts: String,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    blocked_until: Option<DateTime<Utc>>,
}

/// See [`KeyedClaimOps::rate_blocked`](jobs_driver::partition::KeyedClaimOps::rate_blocked).
pub(crate) async fn blocked(conn: &mut AsyncPgConnection, queue: &str, now: DateTime<Utc>) -> Result<i64> {
    let count: Count =
        CachedQuery::new(BLOCKED).bind::<Text, _>(queue).bind::<Timestamptz, _>(now).get_result(conn).await?;
    Ok(count.n)
}

/// See [`KeyedClaimOps::key_rates`](jobs_driver::partition::KeyedClaimOps::key_rates).
pub(crate) async fn read(conn: &mut AsyncPgConnection, queue: &str, keys: &[String]) -> Result<Vec<KeyRate>> {
    let rows: Vec<Row> =
        CachedQuery::new(READ).bind::<Text, _>(queue).bind::<Array<Text>, _>(keys).load(conn).await?;
    Ok(rows.into_iter().map(|r| KeyRate::decode(r.key, r.window_start, &r.counts, r.blocked_until)).collect())
}

/// See [`KeyedClaimOps::store_key_rates`](jobs_driver::partition::KeyedClaimOps::store_key_rates).
pub(crate) async fn write(
    conn: &mut AsyncPgConnection,
    queue: &str,
    rates: &[KeyRate],
    stale_before: DateTime<Utc>,
) -> Result<()> {
    if !rates.is_empty() {
        CachedQuery::new(WRITE)
            .bind::<Text, _>(queue)
            .bind::<Array<Text>, _>(rates.iter().map(|r| r.key.clone()).collect::<Vec<_>>())
            .bind::<Array<Timestamptz>, _>(rates.iter().map(|r| r.window.start).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(rates.iter().map(|r| r.window.encode_counts()).collect::<Vec<_>>())
            .bind::<Array<Nullable<Timestamptz>>, _>(
                rates.iter().map(|r| r.blocked_until).collect::<Vec<_>>(),
            )
            .execute(conn)
            .await?;
    }
    CachedQuery::new(FORGET)
        .bind::<Text, _>(queue)
        .bind::<Timestamptz, _>(stale_before)
        .execute(conn)
        .await?;
    Ok(())
}
