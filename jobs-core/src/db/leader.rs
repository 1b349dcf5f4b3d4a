//! The leader lease: one row per election name, held by one node until it expires.

use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::error::Result;

#[derive(QueryableByName)]
struct Holder {
    #[diesel(sql_type = Text)]
    leader_id: String,
}

const ACQUIRE: &str = "\
INSERT INTO job_leaders AS l (name, leader_id, elected_at, expires_at)
SELECT $1, $2, clock.now, clock.now + $3 * interval '1 millisecond'
FROM (SELECT COALESCE($4::timestamptz, now()) AS now) AS clock
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id,
    elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < EXCLUDED.elected_at
RETURNING l.leader_id";

/// Takes the lease `name` for `node` for `ttl`, or extends it if `node` already holds it.
/// Returns whether `node` is the leader now.
pub async fn try_acquire<C>(
    conn: &mut C,
    name: &str,
    node: &str,
    ttl: Duration,
    now: Option<DateTime<Utc>>,
) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let rows: Vec<Holder> = diesel::sql_query(ACQUIRE)
        .bind::<Text, _>(name)
        .bind::<Text, _>(node)
        .bind::<BigInt, _>(ttl_ms)
        .bind::<Nullable<Timestamptz>, _>(now)
        .load(conn)
        .await?;
    Ok(rows.iter().any(|r| r.leader_id == node))
}

/// Gives the lease up, if `node` holds it, so another node can take over at once.
pub async fn release<C>(conn: &mut C, name: &str, node: &str) -> Result<()>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    diesel::sql_query("DELETE FROM job_leaders WHERE name = $1 AND leader_id = $2")
        .bind::<Text, _>(name)
        .bind::<Text, _>(node)
        .execute(conn)
        .await?;
    Ok(())
}

/// The current holder of lease `name`, if it has not expired.
pub async fn current<C>(conn: &mut C, name: &str, now: Option<DateTime<Utc>>) -> Result<Option<String>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let rows: Vec<Holder> = diesel::sql_query(
        "SELECT leader_id FROM job_leaders WHERE name = $1 AND expires_at > COALESCE($2::timestamptz, now())",
    )
    .bind::<Text, _>(name)
    .bind::<Nullable<Timestamptz>, _>(now)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next().map(|r| r.leader_id))
}
