//! The leader lease: one row per election name, held by one node until it expires or its
//! node stops heartbeating.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{DriverError, LeaderGetParams, LeaderReleaseParams, LeaderTryAcquireParams, Result};

use crate::cached::CachedQuery;
use crate::time::{micros, naive_opt};

#[derive(QueryableByName)]
struct Lease {
    #[diesel(sql_type = Text)]
    leader_id: String,
    #[diesel(sql_type = Bool)]
    free: bool,
}

// $1 name, $2 node, $3 now, $4 ttl (µs).
const CLAIM_FREE: &str = "\
INSERT IGNORE INTO job_leaders (name, leader_id, elected_at, expires_at)
VALUES ($1, $2, COALESCE($3, UTC_TIMESTAMP(6)), COALESCE($3, UTC_TIMESTAMP(6)) + INTERVAL $4 MICROSECOND)";

// The lease is free once expired, or when its holder's node is gone ($2 now, $3 its
// staleness and $4 the lock-lost grace, in µs).
const READ_LEASE: &str = concat!(
    "\
SELECT l.leader_id,
       (l.expires_at < COALESCE($2, UTC_TIMESTAMP(6))
        OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = l.leader_id AND ",
    crate::liveness::node_gone!("n", "COALESCE($2, UTC_TIMESTAMP(6))", "$3", "$4"),
    ")) AS free
FROM job_leaders l WHERE l.name = $1
FOR UPDATE"
);

// $1 name, $2 node, $3 now, $4 ttl (µs), $5 whether the node is newly elected.
const TAKE: &str = "\
UPDATE job_leaders
SET elected_at = IF($5, COALESCE($3, UTC_TIMESTAMP(6)), elected_at),
    expires_at = COALESCE($3, UTC_TIMESTAMP(6)) + INTERVAL $4 MICROSECOND,
    leader_id = $2
WHERE name = $1";

/// See [`LeaderTryAcquireParams`]: in one transaction, take a lease nobody holds (an
/// insert that ignores an existing row), or else lock the lease and extend it (its
/// holder) or take it over (expired, or its holder's node silent).
pub(crate) async fn try_acquire(
    conn: &mut AsyncMysqlConnection,
    params: LeaderTryAcquireParams<'_>,
) -> Result<bool> {
    let now = naive_opt(params.now);
    conn.transaction::<_, DriverError, _>(async |tx| {
        let inserted = CachedQuery::new(CLAIM_FREE)
            .bind::<Text, _>(params.name)
            .bind::<Text, _>(params.node)
            .bind::<Nullable<Datetime>, _>(now)
            .bind::<BigInt, _>(micros(params.ttl))
            .execute(tx)
            .await?;
        if inserted == 1 {
            return Ok(true);
        }
        let lease: Option<Lease> = CachedQuery::new(READ_LEASE)
            .bind::<Text, _>(params.name)
            .bind::<Nullable<Datetime>, _>(now)
            .bind::<BigInt, _>(micros(params.holder_stale_after))
            .bind::<BigInt, _>(micros(params.lock_lost_grace))
            .load(tx)
            .await?
            .pop();
        let Some(lease) = lease else { return Ok(false) };
        let holder = lease.leader_id == params.node;
        if !holder && !lease.free {
            return Ok(false);
        }
        CachedQuery::new(TAKE)
            .bind::<Text, _>(params.name)
            .bind::<Text, _>(params.node)
            .bind::<Nullable<Datetime>, _>(now)
            .bind::<BigInt, _>(micros(params.ttl))
            .bind::<Bool, _>(!holder)
            .execute(tx)
            .await?;
        Ok(true)
    })
    .await
}

/// See [`LeaderReleaseParams`].
pub(crate) async fn release(conn: &mut AsyncMysqlConnection, params: LeaderReleaseParams<'_>) -> Result<()> {
    CachedQuery::new("DELETE FROM job_leaders WHERE name = $1 AND leader_id = $2")
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .execute(conn)
        .await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Holder {
    #[diesel(sql_type = Text)]
    leader_id: String,
}

/// See [`LeaderGetParams`].
pub(crate) async fn get(
    conn: &mut AsyncMysqlConnection,
    params: LeaderGetParams<'_>,
) -> Result<Option<String>> {
    let rows: Vec<Holder> = CachedQuery::new(
        "SELECT leader_id FROM job_leaders WHERE name = $1 AND expires_at > COALESCE($2, UTC_TIMESTAMP(6))",
    )
    .bind::<Text, _>(params.name)
    .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
    .load(conn)
    .await?;
    Ok(rows.into_iter().next().map(|r| r.leader_id))
}
