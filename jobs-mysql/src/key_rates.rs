//! A queue's rate usage per partition key, in `job_key_rates`: the statements a limited
//! claim runs under the queue's lock ([`jobs_driver::partition`], "A rate per key"). Keys
//! travel as JSON and are compared in binary, as the column is.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::sql_types::{Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::Result;
use jobs_driver::partition::KeyRate;
use jobs_driver::rows::Count;

use crate::cached::CachedQuery;
use crate::time::{naive, utc};

const BLOCKED: &str = "\
SELECT COUNT(*) AS n FROM job_key_rates WHERE queue = $1 AND blocked_until > $2";

const READ: &str = "\
SELECT r.`key` AS rkey, r.window_start, r.counts, r.blocked_until
FROM JSON_TABLE($2, '$[*]' COLUMNS (k VARCHAR(255) PATH '$')) AS e
STRAIGHT_JOIN job_key_rates r
  ON r.queue = $1 AND r.`key` = CONVERT(e.k USING utf8mb4) COLLATE utf8mb4_bin";

// Each row `{"k": key, "w": window start, "c": counts, "b": blocked until}`, `b` left out
// when the key is not blocked (NULL ON EMPTY).
const WRITE: &str = "\
INSERT INTO job_key_rates (queue, `key`, window_start, counts, blocked_until)
SELECT $1, CONVERT(e.k USING utf8mb4) COLLATE utf8mb4_bin, e.w, e.c, e.b
FROM JSON_TABLE($2, '$[*]' COLUMNS (k VARCHAR(255) PATH '$.k', w DATETIME(6) PATH '$.w',
                                    c TEXT PATH '$.c', b DATETIME(6) PATH '$.b')) AS e
ON DUPLICATE KEY UPDATE window_start = e.w, counts = e.c, blocked_until = e.b";

const FORGET: &str = "DELETE FROM job_key_rates WHERE queue = $1 AND window_start < $2";

#[derive(diesel::QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    rkey: String,
    #[diesel(sql_type = Datetime)]
    window_start: NaiveDateTime,
    #[diesel(sql_type = Text)]
    counts: String,
    #[diesel(sql_type = Nullable<Datetime>)]
    blocked_until: Option<NaiveDateTime>,
}

fn text(t: DateTime<Utc>) -> String {
    naive(t).format("%Y-%m-%d %H:%M:%S%.6f").to_string()
}

/// See [`KeyedClaimOps::rate_blocked`](jobs_driver::partition::KeyedClaimOps::rate_blocked).
pub(crate) async fn blocked(conn: &mut AsyncMysqlConnection, queue: &str, now: DateTime<Utc>) -> Result<i64> {
    let counted: Vec<Count> =
        CachedQuery::new(BLOCKED).bind::<Text, _>(queue).bind::<Datetime, _>(naive(now)).load(conn).await?;
    Ok(counted.iter().map(|c| c.n).next().unwrap_or(0))
}

/// See [`KeyedClaimOps::key_rates`](jobs_driver::partition::KeyedClaimOps::key_rates).
pub(crate) async fn read(
    conn: &mut AsyncMysqlConnection,
    queue: &str,
    keys: &[String],
) -> Result<Vec<KeyRate>> {
    let keys = serde_json::Value::from(keys.to_vec()).to_string();
    let rows: Vec<Row> =
        CachedQuery::new(READ).bind::<Text, _>(queue).bind::<Text, _>(&keys).load(conn).await?;
    Ok(rows
        .into_iter()
        .map(|r| KeyRate::decode(r.rkey, utc(r.window_start), &r.counts, r.blocked_until.map(utc)))
        .collect())
}

/// See [`KeyedClaimOps::store_key_rates`](jobs_driver::partition::KeyedClaimOps::store_key_rates).
pub(crate) async fn write(
    conn: &mut AsyncMysqlConnection,
    queue: &str,
    rates: &[KeyRate],
    stale_before: DateTime<Utc>,
) -> Result<()> {
    if !rates.is_empty() {
        let rows: Vec<serde_json::Value> = rates
            .iter()
            .map(|r| {
                let mut row = serde_json::json!({
                    "k": r.key, "w": text(r.window.start), "c": r.window.encode_counts(),
                });
                if let (Some(b), Some(obj)) = (r.blocked_until, row.as_object_mut()) {
                    obj.insert("b".into(), text(b).into());
                }
                row
            })
            .collect();
        CachedQuery::new(WRITE)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(serde_json::Value::Array(rows).to_string())
            .execute(conn)
            .await?;
    }
    CachedQuery::new(FORGET)
        .bind::<Text, _>(queue)
        .bind::<Datetime, _>(naive(stale_before))
        .execute(conn)
        .await?;
    Ok(())
}
