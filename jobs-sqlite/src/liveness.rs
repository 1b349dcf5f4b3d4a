//! Node liveness locks: each node holds an exclusive file lock (`flock`) on a file of its
//! own beside the database (`<database>-nodes/<hash of its name>.lock`) for as long as its
//! process lives, and its heartbeat writes the time into it. When the process dies the
//! kernel releases the lock. Any process on the host — every process sharing a SQLite file
//! is on one host — can tell:
//!
//! - a lock it can take: the node is gone (once its row's heartbeat is older than the
//!   lock-lost grace);
//! - a lock held: the node's process lives; it is gone only when neither its row's
//!   heartbeat nor the file's time is newer than the staleness (a frozen process). The
//!   file's time is written without the database's write lock, so a process that another
//!   one keeps from writing (SQLite serves one writer at a time) is not taken for dead.
//!
//! Liveness is decided here, in Rust, and handed to the rescue and leader statements as
//! the names of the nodes that are gone or alive.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{DriverError, NodeHold, NodeLock, Result, node_lock_hash};

/// The lock file of `node` for the database at `database`.
pub(crate) fn lock_path(database: &Path, node: &str) -> PathBuf {
    let mut dir = database.as_os_str().to_owned();
    dir.push("-nodes");
    PathBuf::from(dir).join(format!("{:016x}.lock", node_lock_hash(node)))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Writes `ms` as the file's whole content.
fn stamp(file: &mut File, ms: i64) -> std::io::Result<()> {
    let text = ms.to_string();
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.set_len(text.len() as u64)
}

/// Takes `node`'s lock for the database at `database` (blocking: file system calls). The
/// path recorded is absolute, so that every process finds the file whatever its working
/// directory.
pub(crate) fn hold(database: &Path, node: &str) -> Result<NodeHold> {
    let path = lock_path(&crate::local::canonical(database), node);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io_error(&path, e))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io_error(&path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(NodeHold::Taken),
        Err(TryLockError::Error(e)) => return Err(io_error(&path, e)),
    }
    stamp(&mut file, now_ms()).map_err(|e| io_error(&path, e))?;
    let key = path.to_string_lossy().into_owned();
    Ok(NodeHold::Held(Box::new(SqliteNodeLock { key, file })))
}

fn io_error(path: &Path, e: std::io::Error) -> DriverError {
    DriverError::Io(std::io::Error::new(e.kind(), format!("the node lock file {}: {e}", path.display())))
}

/// A held file lock (closing the file releases it).
#[derive(Debug)]
pub(crate) struct SqliteNodeLock {
    key: String,
    file: File,
}

#[async_trait]
impl NodeLock for SqliteNodeLock {
    fn key(&self) -> &str {
        &self.key
    }

    async fn keep(&mut self) -> Result<bool> {
        // The lock is the open file's: it cannot be lost while the file is open. Its time
        // says the process is not frozen.
        let path = self.key.clone();
        stamp(&mut self.file, now_ms()).map_err(|e| io_error(Path::new(&path), e))?;
        Ok(true)
    }
}

/// What a lock file says of its node.
enum Probe {
    /// Nobody holds it (or it is gone): the process died.
    Free,
    /// A live process holds it; the time its heartbeat last wrote there.
    Held(Option<i64>),
}

fn probe(path: &Path) -> Probe {
    let mut file = match File::open(path) {
        Ok(file) => file,
        // The file is gone: nobody holds it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.is_absolute() => return Probe::Free,
        // Unreadable here (permissions, a relative path of another process's): say nothing
        // beyond the row's heartbeat.
        Err(_) => return Probe::Held(None),
    };
    match file.try_lock_shared() {
        // Taken by us for a moment: nobody else had it. Dropping the file releases it.
        Ok(()) => Probe::Free,
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let at = file.read_to_string(&mut text).ok().and_then(|_| text.trim().parse().ok());
            Probe::Held(at)
        }
        // A file system that cannot lock: say nothing beyond the row's heartbeat.
        Err(TryLockError::Error(_)) => Probe::Held(None),
    }
}

#[derive(QueryableByName)]
struct NodeBeat {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = BigInt)]
    heartbeat_at: i64,
    #[diesel(sql_type = Nullable<Text>)]
    lock_path: Option<String>,
}

/// The registered nodes that are gone (see the module's rule).
pub(crate) struct Liveness {
    pub(crate) gone: HashSet<String>,
}

impl Liveness {
    /// The nodes gone at `now_ms`: with `silence`, those silent for `stale_ms` (their lock
    /// held or not: a frozen process); with `by_lock`, those whose lock is free and whose
    /// heartbeat is older than `grace_ms` (not right after a database outage, see
    /// `JobRescueStuckParams::lost_nodes_by_lock`).
    pub(crate) fn read(
        conn: &mut SqliteConnection,
        now_ms: i64,
        (stale_ms, silence): (i64, bool),
        (grace_ms, by_lock): (i64, bool),
    ) -> Result<Liveness> {
        let nodes: Vec<NodeBeat> =
            diesel::sql_query("SELECT name, heartbeat_at, lock_path FROM job_nodes").load(conn)?;
        let mut gone = HashSet::new();
        for node in nodes {
            let beat = node.heartbeat_at;
            let is_gone = match node.lock_path.as_deref().map(|p| probe(Path::new(p))) {
                None => silence && beat <= now_ms - stale_ms,
                Some(Probe::Free) => {
                    (silence && beat <= now_ms - stale_ms) || (by_lock && beat <= now_ms - grace_ms)
                }
                Some(Probe::Held(at)) => silence && beat.max(at.unwrap_or(i64::MIN)) <= now_ms - stale_ms,
            };
            if is_gone {
                gone.insert(node.name);
            }
        }
        Ok(Liveness { gone })
    }

    /// The gone nodes' names as a JSON array, for `json_each`.
    pub(crate) fn gone_json(&self) -> String {
        serde_json::to_string(&self.gone).unwrap_or_else(|_| "[]".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_seen_held_with_its_time_and_a_released_one_free() {
        let dir = std::env::temp_dir().join(format!("jobs-liveness-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let database = dir.join("jobs.db");
        let NodeHold::Held(lock) = hold(&database, "node-a").expect("hold") else { panic!("not held") };
        assert!(matches!(hold(&database, "node-a"), Ok(NodeHold::Taken)), "a second holder is refused");
        let path = lock_path(&database, "node-a");
        assert!(matches!(probe(&path), Probe::Held(Some(at)) if at > 0));
        drop(lock);
        assert!(matches!(probe(&path), Probe::Free));
        assert!(matches!(hold(&database, "node-a"), Ok(NodeHold::Held(_))), "free again once dropped");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
