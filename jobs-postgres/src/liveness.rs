//! Node liveness locks: each node holds a session-level advisory lock, keyed by its name,
//! on a connection of its own for as long as its process lives. When the process dies its
//! connection closes and Postgres releases the lock; the rescuer and the leader election
//! ([`node_gone!`]) read `pg_locks` and treat a node whose lock is free as gone once its
//! heartbeat is a little old. Behind a pooler in transaction mode a session lock would
//! stay with whichever server connection the pooler lent, so such a driver holds its lock
//! on its direct connection ([`PgDriver::listen_directly`](crate::PgDriver::listen_directly))
//! or holds none.

use async_trait::async_trait;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_driver::{NodeHold, NodeLock, Result, node_lock_hash};

use crate::pool::{self, Pool};

/// Whether the node of job-node row `$n` (with `heartbeat_at` and `lock_key`) has its
/// liveness lock free while its heartbeat is older than `$grace` ms at `$now` (a live node
/// whose lock connection broke takes the lock again at its next heartbeat). Parameters
/// are SQL expressions (a macro, for `concat!`).
#[rustfmt::skip]
macro_rules! lock_lost {
    ($n:literal, $now:literal, $grace:literal) => {
        concat!(
            "(", $n, ".lock_key IS NOT NULL AND ", $n, ".heartbeat_at <= ", $now, " - ", $grace,
            " * interval '1 millisecond'
      AND NOT EXISTS (SELECT 1 FROM pg_locks l
                      WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                        AND l.classid = ((", $n, ".lock_key >> 32) & 4294967295)::oid
                        AND l.objid = (", $n, ".lock_key & 4294967295)::oid))"
        )
    };
}
pub(crate) use lock_lost;

/// Whether the node of job-node row `$n` is gone at `$now`: silent for `$stale` ms, or
/// its lock lost (see [`lock_lost!`]).
#[rustfmt::skip]
macro_rules! node_gone {
    ($n:literal, $now:literal, $stale:literal, $grace:literal) => {
        concat!(
            "(", $n, ".heartbeat_at <= ", $now, " - ", $stale, " * interval '1 millisecond' OR ",
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

/// Where the lock's connection comes from.
#[derive(Clone)]
pub(crate) enum Source {
    /// Taken out of the driver's pool for good.
    Pool(Pool),
    /// Opened to this URL (the database itself, when the pool goes through a pooler).
    Direct(String),
}

impl Source {
    async fn connect(&self) -> Result<AsyncPgConnection> {
        match self {
            Source::Pool(pool) => {
                Ok(diesel_async::pooled_connection::deadpool::Object::take(pool::get(pool).await?))
            }
            Source::Direct(url) => pool::connect(url).await,
        }
    }
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Bool)]
    locked: bool,
}

/// The advisory lock's key for `node`: its name's hash, as Postgres's `bigint`.
pub(crate) fn key(node: &str) -> i64 {
    i64::from_ne_bytes(node_lock_hash(node).to_ne_bytes())
}

async fn try_lock(conn: &mut AsyncPgConnection, key: i64) -> Result<bool> {
    let row: Locked = diesel::sql_query("SELECT pg_try_advisory_lock($1) AS locked")
        .bind::<BigInt, _>(key)
        .get_result(conn)
        .await?;
    Ok(row.locked)
}

/// Takes `node`'s lock on a connection of its own from `source`.
pub(crate) async fn hold(source: Source, node: &str) -> Result<NodeHold> {
    let key = key(node);
    let mut conn = source.connect().await?;
    if !try_lock(&mut conn, key).await? {
        return Ok(NodeHold::Taken);
    }
    Ok(NodeHold::Held(Box::new(PgNodeLock { key, key_text: key.to_string(), conn: Some(conn), source })))
}

/// A held advisory lock and its connection (closing it releases the lock).
pub(crate) struct PgNodeLock {
    key: i64,
    key_text: String,
    /// `None` after the connection failed, until `keep` opens another.
    conn: Option<AsyncPgConnection>,
    source: Source,
}

impl std::fmt::Debug for PgNodeLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgNodeLock").field("key", &self.key).field("connected", &self.conn.is_some()).finish()
    }
}

#[async_trait]
impl NodeLock for PgNodeLock {
    fn key(&self) -> &str {
        &self.key_text
    }

    async fn keep(&mut self) -> Result<bool> {
        if let Some(conn) = self.conn.as_mut() {
            let alive = tokio::time::timeout(
                KEEP_TIMEOUT,
                diesel::sql_query("SELECT true AS locked").get_result::<Locked>(conn),
            )
            .await;
            if matches!(alive, Ok(Ok(_))) {
                return Ok(true);
            }
            // The connection is gone (or hangs: a half-open connection after a failover),
            // and the lock with it: take it again on a new one.
            self.conn = None;
        }
        let retake = async {
            let mut conn = self.source.connect().await?;
            let locked = try_lock(&mut conn, self.key).await?;
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
