//! Node liveness locks: each node holds a user-level lock (`GET_LOCK`), named after its
//! database and its name, on a connection of its own for as long as its process lives.
//! When the process dies its connection closes and the server frees the lock; the rescuer
//! and the leader election ([`node_gone!`]) read `IS_USED_LOCK` and treat a node whose
//! lock is free as gone once its heartbeat is a little old. (User-level locks belong to
//! the server, not to one database: the name carries the database's, so that two
//! databases' nodes of one name do not meet. Galera does not replicate them.)

use async_trait::async_trait;
use diesel::QueryableByName;
use diesel::sql_types::{Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{NodeHold, NodeLock, Result, node_lock_hash};

use crate::pool::{self, Pool};

/// Whether the node of job-node row `$n` (with `heartbeat_at` and `lock_name`) has its
/// liveness lock free while its heartbeat is older than `$grace` µs at `$now` (a live node
/// whose lock connection broke takes the lock again at its next heartbeat). Parameters
/// are SQL expressions (a macro, for `concat!`).
#[rustfmt::skip]
macro_rules! lock_lost {
    ($n:literal, $now:literal, $grace:literal) => {
        concat!(
            "(", $n, ".lock_name IS NOT NULL AND ", $n, ".heartbeat_at <= ", $now, " - INTERVAL ", $grace,
            " MICROSECOND AND IS_USED_LOCK(", $n, ".lock_name) IS NULL)"
        )
    };
}
pub(crate) use lock_lost;

/// Whether the node of job-node row `$n` is gone at `$now`: silent for `$stale` µs, or its
/// lock lost (see [`lock_lost!`]).
#[rustfmt::skip]
macro_rules! node_gone {
    ($n:literal, $now:literal, $stale:literal, $grace:literal) => {
        concat!(
            "(", $n, ".heartbeat_at <= ", $now, " - INTERVAL ", $stale, " MICROSECOND OR ",
            crate::liveness::lock_lost!($n, $now, $grace),
            ")"
        )
    };
}
pub(crate) use node_gone;

/// How long keeping the lock may take (a check, or a reconnection and the lock taken
/// again) before it counts as failed: long enough that a database merely slow (whose
/// heartbeats are slow too) does not make the node drop a lock it holds, and with it its
/// jobs (the silence rule, 8 s, would judge it first); short enough that a connection dead
/// without a reset does not keep the node's lock state stale for long.
const KEEP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(QueryableByName)]
struct Got {
    #[diesel(sql_type = Nullable<diesel::sql_types::BigInt>)]
    got: Option<i64>,
}

#[derive(QueryableByName)]
struct Database {
    #[diesel(sql_type = Nullable<Text>)]
    name: Option<String>,
}

async fn take(pool: &Pool) -> Result<AsyncMysqlConnection> {
    Ok(diesel_async::pooled_connection::deadpool::Object::take(pool::get(pool).await?))
}

/// `GET_LOCK(name, 0)`: 1 taken, 0 held by another session.
async fn get_lock(conn: &mut AsyncMysqlConnection, name: &str) -> Result<bool> {
    let got: Got = diesel::sql_query("SELECT CAST(GET_LOCK(?, 0) AS SIGNED) AS got")
        .bind::<Text, _>(name)
        .get_result(conn)
        .await?;
    Ok(got.got == Some(1))
}

/// Takes `node`'s lock on a connection taken out of `pool` for good.
pub(crate) async fn hold(pool: &Pool, node: &str) -> Result<NodeHold> {
    let mut conn = take(pool).await?;
    let database: Database = diesel::sql_query("SELECT DATABASE() AS name").get_result(&mut conn).await?;
    let scope = format!("{}\u{0}{node}", database.name.unwrap_or_default());
    // 26 characters: user-level lock names may have 64.
    let name = format!("jobs-node-{:016x}", node_lock_hash(&scope));
    if !get_lock(&mut conn, &name).await? {
        return Ok(NodeHold::Taken);
    }
    Ok(NodeHold::Held(Box::new(MysqlNodeLock { name, conn: Some(conn), pool: pool.clone() })))
}

/// A held user-level lock and its connection (closing it frees the lock).
pub(crate) struct MysqlNodeLock {
    name: String,
    /// `None` after the connection failed, until `keep` opens another.
    conn: Option<AsyncMysqlConnection>,
    pool: Pool,
}

impl std::fmt::Debug for MysqlNodeLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlNodeLock")
            .field("name", &self.name)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

#[async_trait]
impl NodeLock for MysqlNodeLock {
    fn key(&self) -> &str {
        &self.name
    }

    async fn keep(&mut self) -> Result<bool> {
        if let Some(conn) = self.conn.as_mut() {
            let check = diesel::sql_query("SELECT CAST(1 AS SIGNED) AS got").get_result::<Got>(conn);
            if matches!(tokio::time::timeout(KEEP_TIMEOUT, check).await, Ok(Ok(_))) {
                return Ok(true);
            }
            // The connection is gone (or hangs), and the lock with it: take it again.
            self.conn = None;
        }
        let retake = async {
            let mut conn = take(&self.pool).await?;
            let locked = get_lock(&mut conn, &self.name).await?;
            Ok::<_, jobs_driver::DriverError>((conn, locked))
        };
        let (conn, locked) = tokio::time::timeout(KEEP_TIMEOUT, retake)
            .await
            .map_err(|_| jobs_driver::DriverError::Pool("taking the node's lock again timed out".into()))??;
        if locked {
            self.conn = Some(conn);
        }
        Ok(locked)
    }
}
