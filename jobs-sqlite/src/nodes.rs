//! Node heartbeats: each running worker node keeps its row fresh; the rescuer treats the
//! jobs of nodes with stale (or missing) rows as abandoned.

use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{NodeHeartbeatParams, NodeRow, Result};

use crate::cached::CachedQuery;
use crate::exec::write;
use crate::local::Local;
use crate::rows::json;
use crate::time::{from_ms, now_ms};

const HEARTBEAT: &str = "\
INSERT INTO job_nodes (name, host, pid, started_at, heartbeat_at, queues, kinds, lock_path, kind_options)
VALUES ($1, $2, $3, $5, $5, $4, $6, $7, $9)
ON CONFLICT (name) DO UPDATE
SET heartbeat_at = excluded.heartbeat_at, queues = excluded.queues, kinds = excluded.kinds,
    kind_options = excluded.kind_options,
    lock_path = excluded.lock_path,
    -- A process's first heartbeat (a restart with a fixed name too) starts the node afresh.
    started_at = CASE WHEN $8 THEN excluded.started_at ELSE job_nodes.started_at END,
    host = excluded.host, pid = excluded.pid";

/// [`heartbeat`] on `local`'s writer, its parameters owned for the connection's thread.
pub(crate) async fn heartbeat_through(local: &Local, params: NodeHeartbeatParams<'_>) -> Result<()> {
    let NodeHeartbeatParams { node, host, pid, queues, kinds, kind_options, now, lock, registering } = params;
    let (node, host, queues, kind_options) =
        (node.to_owned(), host.to_owned(), queues.clone(), kind_options.clone());
    let kinds: Vec<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
    let lock = lock.map(str::to_owned);
    write(local, move |c| {
        let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
        let params = NodeHeartbeatParams {
            node: &node,
            host: &host,
            pid,
            queues: &queues,
            kinds: &kinds,
            kind_options: &kind_options,
            now,
            lock: lock.as_deref(),
            registering,
        };
        heartbeat(c, &params)
    })
    .await
}

/// See [`NodeHeartbeatParams`].
pub(crate) fn heartbeat(conn: &mut SqliteConnection, params: &NodeHeartbeatParams<'_>) -> Result<()> {
    CachedQuery::new(HEARTBEAT)
        .bind::<Text, _>(params.node)
        .bind::<Text, _>(params.host)
        .bind::<Integer, _>(params.pid)
        .bind::<Text, _>(params.queues.to_string())
        .bind::<BigInt, _>(now_ms(params.now))
        .bind::<Text, _>(serde_json::Value::from(params.kinds).to_string())
        .bind::<Nullable<Text>, _>(params.lock)
        .bind::<diesel::sql_types::Bool, _>(params.registering)
        .bind::<Text, _>(params.kind_options.to_string())
        .execute(conn)?;
    Ok(())
}

/// Forgets the nodes silent for `older_than_ms` before `now_ms`. Returns how many went.
pub(crate) fn delete_stale(conn: &mut SqliteConnection, older_than_ms: i64, now_ms: i64) -> Result<i64> {
    let n = CachedQuery::new("DELETE FROM job_nodes WHERE heartbeat_at < $1")
        .bind::<BigInt, _>(now_ms.saturating_sub(older_than_ms))
        .execute(conn)?;
    Ok(n as i64)
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
    #[diesel(sql_type = Text)]
    kinds: String,
    #[diesel(sql_type = Nullable<Text>)]
    kind_options: Option<String>,
}

/// Every registered node, most recently seen first.
pub(crate) fn list(conn: &mut SqliteConnection) -> Result<Vec<NodeRow>> {
    let rows: Vec<Row> = CachedQuery::new(
        "SELECT name, host, pid, started_at, heartbeat_at, queues, kinds, kind_options FROM job_nodes \
         ORDER BY heartbeat_at DESC, name",
    )
    .load(conn)?;
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
                started_at: from_ms(r.started_at),
                heartbeat_at: from_ms(r.heartbeat_at),
            })
        })
        .collect()
}
