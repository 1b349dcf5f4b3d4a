//! Node heartbeats: each running worker node keeps its row fresh; the rescuer treats the
//! jobs of nodes with stale (or missing) rows as abandoned.

use diesel::sql_types::{BigInt, Integer, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{NodeHeartbeatParams, NodeRow, Result};

use crate::cached::CachedQuery;
use crate::rows::json;
use crate::time::{from_ms, now_ms};

const HEARTBEAT: &str = "\
INSERT INTO job_nodes (name, host, pid, started_at, heartbeat_at, queues) VALUES ($1, $2, $3, $5, $5, $4)
ON CONFLICT (name) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, queues = excluded.queues";

/// See [`NodeHeartbeatParams`].
pub(crate) fn heartbeat(conn: &mut SqliteConnection, params: &NodeHeartbeatParams<'_>) -> Result<()> {
    CachedQuery::new(HEARTBEAT)
        .bind::<Text, _>(params.node)
        .bind::<Text, _>(params.host)
        .bind::<Integer, _>(params.pid)
        .bind::<Text, _>(params.queues.to_string())
        .bind::<BigInt, _>(now_ms(params.now))
        .execute(conn)?;
    Ok(())
}

/// Removes a node's row.
pub(crate) fn delete(conn: &mut SqliteConnection, node: &str) -> Result<()> {
    CachedQuery::new("DELETE FROM job_nodes WHERE name = $1").bind::<Text, _>(node).execute(conn)?;
    Ok(())
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    host: String,
    #[diesel(sql_type = Integer)]
    pid: i32,
    #[diesel(sql_type = BigInt)]
    started_at: i64,
    #[diesel(sql_type = BigInt)]
    heartbeat_at: i64,
    #[diesel(sql_type = Text)]
    queues: String,
}

/// Every registered node, most recently seen first.
pub(crate) fn list(conn: &mut SqliteConnection) -> Result<Vec<NodeRow>> {
    let rows: Vec<Row> = CachedQuery::new(
        "SELECT name, host, pid, started_at, heartbeat_at, queues FROM job_nodes ORDER BY heartbeat_at DESC, name",
    )
    .load(conn)?;
    rows.into_iter()
        .map(|r| {
            Ok(NodeRow {
                queues: json("queues", &r.queues)?,
                name: r.name,
                host: r.host,
                pid: r.pid,
                started_at: from_ms(r.started_at),
                heartbeat_at: from_ms(r.heartbeat_at),
            })
        })
        .collect()
}
