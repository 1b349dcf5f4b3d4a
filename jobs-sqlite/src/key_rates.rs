//! A queue's rate usage per partition key, in `job_key_rates`: the statements a limited
//! claim runs in the writer's transaction ([`jobs_driver::partition`], "A rate per key").
//! Times are Unix milliseconds; keys travel as JSON.

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::Result;
use jobs_driver::partition::KeyRate;
use jobs_driver::rows::Count;

use crate::cached::CachedQuery;
use crate::time::{from_ms, to_ms};

const BLOCKED: &str = "\
SELECT count(*) AS n FROM job_key_rates
WHERE queue = $1 AND blocked_until IS NOT NULL AND blocked_until > $2";

const READ: &str = "\
SELECT key, window_start, counts, blocked_until FROM job_key_rates
WHERE queue = $1 AND key IN (SELECT value FROM json_each($2))";

// Each row `[key, window start, counts, blocked until or null]`.
const WRITE: &str = "\
INSERT INTO job_key_rates (queue, key, window_start, counts, blocked_until)
SELECT $1, e.value ->> 0, e.value ->> 1, e.value ->> 2, e.value ->> 3 FROM json_each($2) AS e WHERE true
ON CONFLICT (queue, key) DO UPDATE
SET window_start = excluded.window_start, counts = excluded.counts, blocked_until = excluded.blocked_until";

const FORGET: &str = "DELETE FROM job_key_rates WHERE queue = $1 AND window_start < $2";

#[derive(diesel::QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    key: String,
    #[diesel(sql_type = BigInt)]
    window_start: i64,
    #[diesel(sql_type = Text)]
    counts: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    blocked_until: Option<i64>,
}

/// See [`KeyedClaimOps::rate_blocked`](jobs_driver::partition::KeyedClaimOps::rate_blocked).
pub(crate) fn blocked(conn: &mut SqliteConnection, queue: &str, now: DateTime<Utc>) -> Result<i64> {
    let counted: Vec<Count> =
        CachedQuery::new(BLOCKED).bind::<Text, _>(queue).bind::<BigInt, _>(to_ms(now)).load(conn)?;
    Ok(counted.iter().map(|c| c.n).next().unwrap_or(0))
}

/// See [`KeyedClaimOps::key_rates`](jobs_driver::partition::KeyedClaimOps::key_rates).
pub(crate) fn read(conn: &mut SqliteConnection, queue: &str, keys: &[String]) -> Result<Vec<KeyRate>> {
    let keys = serde_json::Value::from(keys.to_vec()).to_string();
    let rows: Vec<Row> = CachedQuery::new(READ).bind::<Text, _>(queue).bind::<Text, _>(&keys).load(conn)?;
    Ok(rows
        .into_iter()
        .map(|r| KeyRate::decode(r.key, from_ms(r.window_start), &r.counts, r.blocked_until.map(from_ms)))
        .collect())
}

/// See [`KeyedClaimOps::store_key_rates`](jobs_driver::partition::KeyedClaimOps::store_key_rates).
pub(crate) fn write(
    conn: &mut SqliteConnection,
    queue: &str,
    rates: &[KeyRate],
    stale_before: DateTime<Utc>,
) -> Result<()> {
    if !rates.is_empty() {
        let rows: Vec<serde_json::Value> = rates
            .iter()
            .map(|r| {
                serde_json::json!([
                    r.key,
                    to_ms(r.window.start),
                    r.window.encode_counts(),
                    r.blocked_until.map(to_ms)
                ])
            })
            .collect();
        CachedQuery::new(WRITE)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(serde_json::Value::Array(rows).to_string())
            .execute(conn)?;
    }
    CachedQuery::new(FORGET).bind::<Text, _>(queue).bind::<BigInt, _>(to_ms(stale_before)).execute(conn)?;
    Ok(())
}
