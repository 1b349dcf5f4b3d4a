//! Node heartbeats: each running worker node keeps its row fresh; the rescuer treats the
//! jobs of nodes with stale (or missing) rows as abandoned.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Int4, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{NodeDeleteStaleParams, NodeHeartbeatParams, NodeRow, Result};

use crate::rows::millis;

const HEARTBEAT: &str = "\
INSERT INTO job_nodes AS n (name, host, pid, started_at, heartbeat_at, queues, kinds, lock_key, kind_options)
SELECT $1, $2, $3, clock.now, clock.now, $4, $6, $7, $9
FROM (SELECT COALESCE($5::timestamptz, now()) AS now) AS clock
ON CONFLICT (name) DO UPDATE
SET heartbeat_at = EXCLUDED.heartbeat_at, queues = EXCLUDED.queues, kinds = EXCLUDED.kinds,
    kind_options = EXCLUDED.kind_options,
    lock_key = EXCLUDED.lock_key, host = EXCLUDED.host, pid = EXCLUDED.pid,
    -- A process's first heartbeat (a restart with a fixed name too) starts the node afresh.
    started_at = CASE WHEN $8 THEN EXCLUDED.started_at ELSE n.started_at END";

/// See [`NodeHeartbeatParams`].
pub(crate) async fn heartbeat<C>(conn: &mut C, params: NodeHeartbeatParams<'_>) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query(HEARTBEAT)
        .bind::<Text, _>(params.node)
        .bind::<Text, _>(params.host)
        .bind::<Int4, _>(params.pid)
        .bind::<Jsonb, _>(params.queues)
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<Jsonb, _>(serde_json::Value::from(params.kinds))
        .bind::<Nullable<BigInt>, _>(lock_key(params.lock)?)
        .bind::<diesel::sql_types::Bool, _>(params.registering)
        .bind::<Jsonb, _>(params.kind_options)
        .execute(conn)
        .await?;
    Ok(())
}

/// The advisory lock key a heartbeat records (see `liveness`).
fn lock_key(lock: Option<&str>) -> Result<Option<i64>> {
    lock.map(|key| {
        key.parse::<i64>().map_err(|_| {
            jobs_driver::DriverError::unexpected(format!("`{key}` is not a Postgres node lock key"))
        })
    })
    .transpose()
}

/// See [`NodeDeleteStaleParams`].
pub(crate) async fn delete_stale<C>(conn: &mut C, params: NodeDeleteStaleParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let n = diesel::sql_query(
        "DELETE FROM job_nodes WHERE heartbeat_at < COALESCE($1::timestamptz, now()) - $2 * interval '1 millisecond'",
    )
    .bind::<Nullable<Timestamptz>, _>(params.now)
    .bind::<BigInt, _>(millis(params.older_than))
    .execute(conn)
    .await?;
    Ok(n as i64)
}

/// Removes a node's row.
pub(crate) async fn delete<C>(conn: &mut C, node: &str) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query("DELETE FROM job_nodes WHERE name = $1").bind::<Text, _>(node).execute(conn).await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    host: String,
    #[diesel(sql_type = Int4)]
    pid: i32,
    #[diesel(sql_type = Timestamptz)]
    started_at: DateTime<Utc>,
    #[diesel(sql_type = Timestamptz)]
    heartbeat_at: DateTime<Utc>,
    #[diesel(sql_type = Jsonb)]
    queues: serde_json::Value,
    #[diesel(sql_type = Jsonb)]
    kinds: serde_json::Value,
    #[diesel(sql_type = Jsonb)]
    kind_options: serde_json::Value,
}

/// Every registered node, most recently seen first.
pub(crate) async fn list<C>(conn: &mut C) -> Result<Vec<NodeRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT name, host, pid, started_at, heartbeat_at, queues, kinds, kind_options FROM job_nodes \
         ORDER BY heartbeat_at DESC, name",
    )
    .load(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| NodeRow {
            name: r.name,
            host: r.host,
            pid: r.pid,
            started_at: r.started_at,
            heartbeat_at: r.heartbeat_at,
            queues: r.queues,
            kinds: serde_json::from_value(r.kinds).unwrap_or_default(),
            kind_options: r.kind_options,
        })
        .collect())
}
