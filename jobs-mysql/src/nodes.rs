//! Node heartbeats: each running worker node keeps its row fresh; the rescuer treats the
//! jobs of nodes with stale (or missing) rows as abandoned.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{NodeDeleteStaleParams, NodeHeartbeatParams, NodeRow, Result};

use crate::cached::CachedQuery;
use crate::rows::json;
use crate::time::{micros, naive_opt, utc};

const HEARTBEAT: &str = "\
INSERT INTO job_nodes (name, host, pid, started_at, heartbeat_at, queues, kinds, lock_name, kind_options)
VALUES ($1, $2, $3, COALESCE($5, UTC_TIMESTAMP(6)), COALESCE($5, UTC_TIMESTAMP(6)), $4, $6, $7, $9)
ON DUPLICATE KEY UPDATE
    -- A process's first heartbeat (a restart with a fixed name too) starts the node afresh.
    started_at = IF($8, COALESCE($5, UTC_TIMESTAMP(6)), started_at),
    host = $2, pid = $3,
    heartbeat_at = COALESCE($5, UTC_TIMESTAMP(6)), queues = $4, kinds = $6, lock_name = $7,
    kind_options = $9";

/// See [`NodeHeartbeatParams`].
pub(crate) async fn heartbeat(
    conn: &mut AsyncMysqlConnection,
    params: NodeHeartbeatParams<'_>,
) -> Result<()> {
    CachedQuery::new(HEARTBEAT)
        .bind::<Text, _>(params.node)
        .bind::<Text, _>(params.host)
        .bind::<Integer, _>(params.pid)
        .bind::<Text, _>(params.queues.to_string())
        .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
        .bind::<Text, _>(serde_json::Value::from(params.kinds).to_string())
        .bind::<Nullable<Text>, _>(params.lock)
        .bind::<diesel::sql_types::Bool, _>(params.registering)
        .bind::<Text, _>(params.kind_options.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// See [`NodeDeleteStaleParams`].
pub(crate) async fn delete_stale(
    conn: &mut AsyncMysqlConnection,
    params: NodeDeleteStaleParams,
) -> Result<i64> {
    let n = CachedQuery::new(
        "DELETE FROM job_nodes WHERE heartbeat_at < COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $2 MICROSECOND",
    )
    .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
    .bind::<BigInt, _>(micros(params.older_than))
    .execute(conn)
    .await?;
    Ok(n as i64)
}

/// Removes a node's row.
pub(crate) async fn delete(conn: &mut AsyncMysqlConnection, node: &str) -> Result<()> {
    CachedQuery::new("DELETE FROM job_nodes WHERE name = $1").bind::<Text, _>(node).execute(conn).await?;
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
    #[diesel(sql_type = Datetime)]
    started_at: NaiveDateTime,
    #[diesel(sql_type = Datetime)]
    heartbeat_at: NaiveDateTime,
    #[diesel(sql_type = Text)]
    queues: String,
    #[diesel(sql_type = Text)]
    kinds: String,
    #[diesel(sql_type = Nullable<Text>)]
    kind_options: Option<String>,
}

/// Every registered node, most recently seen first.
pub(crate) async fn list(conn: &mut AsyncMysqlConnection) -> Result<Vec<NodeRow>> {
    let rows: Vec<Row> = CachedQuery::new(
        "SELECT name, host, pid, started_at, heartbeat_at, queues, kinds, kind_options FROM job_nodes \
         ORDER BY heartbeat_at DESC, name",
    )
    .load(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(NodeRow {
                queues: json("queues", &r.queues)?,
                kinds: json("kinds", &r.kinds)?,
                kind_options: r
                    .kind_options
                    .map_or(Ok(serde_json::json!({})), |o| json("kind_options", &o))?,
                name: r.name,
                host: r.host,
                pid: r.pid,
                started_at: utc(r.started_at),
                heartbeat_at: utc(r.heartbeat_at),
            })
        })
        .collect()
}
