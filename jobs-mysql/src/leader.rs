//! The leader lease: one row per election name, held by one node until it expires or its
//! node stops heartbeating.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{LeaderGetParams, LeaderReleaseParams, LeaderTryAcquireParams, Result};

use crate::cached::CachedQuery;
use crate::time::{micros, naive_opt};

// $1 name, $2 node, $3 now, $4 ttl (µs).
const CLAIM_FREE: &str = "\
INSERT IGNORE INTO job_leaders (name, leader_id, elected_at, expires_at)
VALUES ($1, $2, COALESCE($3, UTC_TIMESTAMP(6)), COALESCE($3, UTC_TIMESTAMP(6)) + INTERVAL $4 MICROSECOND)";

// Extends the lease for its holder, or takes it over when it is free: expired, or its
// holder's node gone ($3 now, $5 its staleness and $6 the lock-lost grace, in µs). The
// conditions are read before the row changes, and `elected_at` (which reads the old
// holder) is assigned before `leader_id`: MySQL assigns left to right.
// $1 name, $2 node, $3 now, $4 ttl (µs), $5, $6.
const EXTEND_OR_TAKE: &str = concat!(
    "\
UPDATE job_leaders l
SET l.elected_at = IF(l.leader_id = $2, l.elected_at, COALESCE($3, UTC_TIMESTAMP(6))),
    l.expires_at = COALESCE($3, UTC_TIMESTAMP(6)) + INTERVAL $4 MICROSECOND,
    l.leader_id = $2
WHERE l.name = $1
  AND (l.leader_id = $2
       OR l.expires_at < COALESCE($3, UTC_TIMESTAMP(6))
       OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = l.leader_id AND ",
    crate::liveness::node_gone!("n", "COALESCE($3, UTC_TIMESTAMP(6))", "$5", "$6"),
    "))"
);

/// See [`LeaderTryAcquireParams`]: take a lease nobody holds (an insert that ignores an
/// existing row), or else extend it (its holder) or take it over (expired, or its
/// holder's node silent), in one statement whose matched row says whether it did.
///
/// Each statement commits on its own: a transaction across them would hold the lease's
/// row locked between round trips, and a node frozen there (a stopped process keeps its
/// connection) would keep every other node from the lease, the leader too, until the
/// server dropped it.
pub(crate) async fn try_acquire(
    conn: &mut AsyncMysqlConnection,
    params: LeaderTryAcquireParams<'_>,
) -> Result<bool> {
    let now = naive_opt(params.now);
    let inserted = CachedQuery::new(CLAIM_FREE)
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .bind::<Nullable<Datetime>, _>(now)
        .bind::<BigInt, _>(micros(params.ttl))
        .execute(conn)
        .await?;
    if inserted == 1 {
        return Ok(true);
    }
    // The rows the update matched (diesel-async's connections count matched rows, not
    // changed ones: a holder whose lease did not move, under a clock held still, counts).
    // Its own answer, not a read after it, which a proxy could send to a replica.
    let updated = CachedQuery::new(EXTEND_OR_TAKE)
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .bind::<Nullable<Datetime>, _>(now)
        .bind::<BigInt, _>(micros(params.ttl))
        .bind::<BigInt, _>(micros(params.holder_stale_after))
        .bind::<BigInt, _>(micros(params.lock_lost_grace))
        .execute(conn)
        .await?;
    Ok(updated == 1)
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
