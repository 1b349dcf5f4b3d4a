//! The leader lease: one row per election name, held by one node until it expires or its
//! node is gone (see `liveness`).

use diesel::sql_types::{BigInt, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{LeaderGetParams, LeaderReleaseParams, LeaderTryAcquireParams, Result};

use crate::cached::CachedQuery;
use crate::exec::write;
use crate::liveness::Liveness;
use crate::local::Local;
use crate::time::{millis, now_ms};

#[derive(QueryableByName)]
struct Holder {
    #[diesel(sql_type = Text)]
    leader_id: String,
}

const ACQUIRE: &str = "\
INSERT INTO job_leaders (name, leader_id, elected_at, expires_at) VALUES ($1, $2, $3, $3 + $4)
ON CONFLICT (name) DO UPDATE
SET leader_id = excluded.leader_id,
    elected_at = CASE WHEN job_leaders.leader_id = excluded.leader_id THEN job_leaders.elected_at
                      ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE job_leaders.leader_id = excluded.leader_id OR job_leaders.expires_at < excluded.elected_at
   OR job_leaders.leader_id IN (SELECT value FROM json_each($5))
RETURNING leader_id";

/// [`try_acquire`] on `local`'s writer, its parameters owned for the connection's thread.
pub(crate) async fn try_acquire_through(local: &Local, params: LeaderTryAcquireParams<'_>) -> Result<bool> {
    let LeaderTryAcquireParams { name, node, ttl, holder_stale_after, lock_lost_grace, now } = params;
    let (name, node) = (name.to_owned(), node.to_owned());
    write(local, move |c| {
        let params = LeaderTryAcquireParams {
            name: &name,
            node: &node,
            ttl,
            holder_stale_after,
            lock_lost_grace,
            now,
        };
        try_acquire(c, &params)
    })
    .await
}

/// See [`LeaderTryAcquireParams`]. The holder's node is gone when `liveness` says so
/// (`$5`: the registered nodes that are gone).
pub(crate) fn try_acquire(conn: &mut SqliteConnection, params: &LeaderTryAcquireParams<'_>) -> Result<bool> {
    let now = now_ms(params.now);
    let gone = Liveness::read(
        conn,
        now,
        (millis(params.holder_stale_after), true),
        (millis(params.lock_lost_grace), true),
    )?;
    let rows: Vec<Holder> = CachedQuery::new(ACQUIRE)
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(millis(params.ttl))
        .bind::<Text, _>(gone.gone_json())
        .load(conn)?;
    Ok(rows.iter().any(|r| r.leader_id == params.node))
}

/// See [`LeaderReleaseParams`].
pub(crate) fn release(conn: &mut SqliteConnection, params: &LeaderReleaseParams<'_>) -> Result<()> {
    CachedQuery::new("DELETE FROM job_leaders WHERE name = $1 AND leader_id = $2")
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .execute(conn)?;
    Ok(())
}

/// See [`LeaderGetParams`].
pub(crate) fn get(conn: &mut SqliteConnection, params: &LeaderGetParams<'_>) -> Result<Option<String>> {
    let rows: Vec<Holder> =
        CachedQuery::new("SELECT leader_id FROM job_leaders WHERE name = $1 AND expires_at > $2")
            .bind::<Text, _>(params.name)
            .bind::<BigInt, _>(now_ms(params.now))
            .load(conn)?;
    Ok(rows.into_iter().next().map(|r| r.leader_id))
}
