//! The leader lease: one row per election name, held by one node until it expires.

use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{LeaderGetParams, LeaderReleaseParams, LeaderTryAcquireParams, Result};

use crate::rows::millis;

#[derive(QueryableByName)]
struct Holder {
    #[diesel(sql_type = Text)]
    leader_id: String,
}

const ACQUIRE: &str = concat!(
    "\
INSERT INTO job_leaders AS l (name, leader_id, elected_at, expires_at)
SELECT $1, $2, clock.now, clock.now + $3 * interval '1 millisecond'
FROM (SELECT COALESCE($4::timestamptz, now()) AS now) AS clock
ON CONFLICT (name) DO UPDATE
SET leader_id = EXCLUDED.leader_id,
    elected_at = CASE WHEN l.leader_id = EXCLUDED.leader_id THEN l.elected_at ELSE EXCLUDED.elected_at END,
    expires_at = EXCLUDED.expires_at
WHERE l.leader_id = EXCLUDED.leader_id OR l.expires_at < EXCLUDED.elected_at
   OR EXISTS (SELECT 1 FROM job_nodes n
              WHERE n.name = l.leader_id AND ",
    crate::liveness::node_gone!("n", "EXCLUDED.elected_at", "$5", "$6"),
    ")
RETURNING l.leader_id"
);

/// See [`LeaderTryAcquireParams`].
pub(crate) async fn try_acquire<C>(conn: &mut C, params: LeaderTryAcquireParams<'_>) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Holder> = diesel::sql_query(ACQUIRE)
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .bind::<BigInt, _>(millis(params.ttl))
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<BigInt, _>(millis(params.holder_stale_after))
        .bind::<BigInt, _>(millis(params.lock_lost_grace))
        .load(conn)
        .await?;
    Ok(rows.iter().any(|r| r.leader_id == params.node))
}

/// See [`LeaderReleaseParams`].
pub(crate) async fn release<C>(conn: &mut C, params: LeaderReleaseParams<'_>) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query("DELETE FROM job_leaders WHERE name = $1 AND leader_id = $2")
        .bind::<Text, _>(params.name)
        .bind::<Text, _>(params.node)
        .execute(conn)
        .await?;
    Ok(())
}

/// See [`LeaderGetParams`].
pub(crate) async fn get<C>(conn: &mut C, params: LeaderGetParams<'_>) -> Result<Option<String>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Holder> = diesel::sql_query(
        "SELECT leader_id FROM job_leaders WHERE name = $1 AND expires_at > COALESCE($2::timestamptz, now())",
    )
    .bind::<Text, _>(params.name)
    .bind::<Nullable<Timestamptz>, _>(params.now)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next().map(|r| r.leader_id))
}
