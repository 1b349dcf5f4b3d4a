//! Node heartbeats: each running worker node keeps its row fresh; the rescuer treats the
//! jobs of nodes with stale (or missing) rows as abandoned.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Int4, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::error::Result;

const HEARTBEAT: &str = "\
INSERT INTO job_nodes AS n (name, host, pid, started_at, heartbeat_at, queues)
SELECT $1, $2, $3, clock.now, clock.now, $4
FROM (SELECT COALESCE($5::timestamptz, now()) AS now) AS clock
ON CONFLICT (name) DO UPDATE
SET heartbeat_at = EXCLUDED.heartbeat_at, queues = EXCLUDED.queues";

/// Records that `node` is alive (registering it on the first call). `queues` describes
/// what it runs, e.g. `{"default": {"limit": 20, "running": 3}}`.
pub async fn heartbeat<C>(
    conn: &mut C,
    node: &str,
    host: &str,
    pid: i32,
    queues: &serde_json::Value,
    now: Option<DateTime<Utc>>,
) -> Result<()>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    diesel::sql_query(HEARTBEAT)
        .bind::<Text, _>(node)
        .bind::<Text, _>(host)
        .bind::<Int4, _>(pid)
        .bind::<Jsonb, _>(queues)
        .bind::<Nullable<Timestamptz>, _>(now)
        .execute(conn)
        .await?;
    Ok(())
}

/// Removes a node's row (on clean shutdown, after its jobs were written back).
pub async fn remove<C>(conn: &mut C, node: &str) -> Result<()>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    diesel::sql_query("DELETE FROM job_nodes WHERE name = $1").bind::<Text, _>(node).execute(conn).await?;
    Ok(())
}

/// A node as the dashboard shows it.
#[derive(Debug, Clone, QueryableByName)]
pub struct NodeRow {
    /// Node name.
    #[diesel(sql_type = Text)]
    pub name: String,
    /// Host name.
    #[diesel(sql_type = Text)]
    pub host: String,
    /// Process id.
    #[diesel(sql_type = Int4)]
    pub pid: i32,
    /// First heartbeat.
    #[diesel(sql_type = Timestamptz)]
    pub started_at: DateTime<Utc>,
    /// Latest heartbeat.
    #[diesel(sql_type = Timestamptz)]
    pub heartbeat_at: DateTime<Utc>,
    /// Queues and their load.
    #[diesel(sql_type = Jsonb)]
    pub queues: serde_json::Value,
}

/// Every registered node, most recently seen first.
pub async fn list<C>(conn: &mut C) -> Result<Vec<NodeRow>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(diesel::sql_query(
        "SELECT name, host, pid, started_at, heartbeat_at, queues FROM job_nodes ORDER BY heartbeat_at DESC, name",
    )
    .load(conn)
    .await?)
}
