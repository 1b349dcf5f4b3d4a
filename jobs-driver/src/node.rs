//! Worker nodes: each keeps its row fresh with heartbeats; the rescuer treats the jobs of
//! nodes with stale (or missing) rows as abandoned.

use chrono::{DateTime, Utc};

/// A node as the dashboard shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    /// Node name.
    pub name: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// First heartbeat.
    pub started_at: DateTime<Utc>,
    /// Latest heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// Queues and their load: `{"default": {"limit": 20, "running": 3, "buffered": 12}}`
    /// (`buffered`: jobs claimed ahead of the free slots, waiting for one).
    pub queues: serde_json::Value,
    /// The job kinds it has registered (it runs them from any of its queues).
    pub kinds: Vec<String>,
    /// Each kind's options as the node declares them (`{"kind": {"queue": …,
    /// "max_attempts": …}}`, in `jobs_core::JobOptions::to_published`'s form): what a
    /// process that does not link the kind enqueues it with. Empty for a node that
    /// published none.
    pub kind_options: serde_json::Value,
}

impl NodeRow {
    /// Whether the node runs `queue` and knows `kind`.
    pub fn can_run(&self, queue: &str, kind: &str) -> bool {
        self.queues.get(queue).is_some() && self.kinds.iter().any(|k| k == kind)
    }
}

/// `node_heartbeat`: record that `node` is alive, registering it on the first call.
#[derive(Debug, Clone, Copy)]
pub struct NodeHeartbeatParams<'a> {
    /// Node name.
    pub node: &'a str,
    /// Host name.
    pub host: &'a str,
    /// Process id.
    pub pid: i32,
    /// What it runs (see [`NodeRow::queues`]).
    pub queues: &'a serde_json::Value,
    /// The job kinds it has registered.
    pub kinds: &'a [&'a str],
    /// Each kind's options (see [`NodeRow::kind_options`]).
    pub kind_options: &'a serde_json::Value,
    /// The heartbeat's time.
    pub now: Option<DateTime<Utc>>,
    /// The node's liveness lock, as [`NodeLock::key`] names it for the rescuer and the
    /// leader election (`None`: the node holds none, and only its heartbeats tell that it
    /// lives).
    pub lock: Option<&'a str>,
    /// The first heartbeat of the node's process: its `started_at` becomes now. A job
    /// claimed under the node's name before then was claimed by an earlier process of that
    /// name (a restart with a fixed name), which is gone: the rescuer takes it back.
    pub registering: bool,
}

/// `node_hold`: take `node`'s liveness lock, held for as long as the returned
/// [`NodeLock`] lives, on a connection (or a file) of its own. A process that dies loses
/// its connections and files at once, and with them the lock: the rescuer and the leader
/// election read a free lock as the node gone (once its heartbeat is a little old: see
/// [`JobRescueStuckParams::lock_lost_grace`](crate::JobRescueStuckParams::lock_lost_grace)),
/// in seconds instead of after `node_stale_after` of silence. The lock is keyed by the
/// node's name, so a second live process with the same name cannot take it.
#[derive(Debug, Clone, Copy)]
pub struct NodeHoldParams<'a> {
    /// Node name.
    pub node: &'a str,
}

/// What [`node_hold`](crate::Driver::node_hold) got.
#[derive(Debug)]
pub enum NodeHold {
    /// The lock is this process's until the value is dropped.
    Held(Box<dyn NodeLock>),
    /// Another live process holds it: the name is taken.
    Taken,
    /// The driver can hold no lock here (why): the node's liveness is its heartbeats
    /// alone. Behind a pooler in transaction mode, for one: a session lock would stay
    /// with whichever server connection the pooler lent.
    Unsupported(&'static str),
}

/// A node's liveness lock, held until dropped.
#[async_trait::async_trait]
pub trait NodeLock: Send + std::fmt::Debug {
    /// What the node's heartbeat records so that others find the lock (an advisory lock's
    /// key, a named lock, a file's path).
    fn key(&self) -> &str;

    /// Makes sure the lock is still held, and says so where others read it: takes it again
    /// (on a new connection) when its connection was lost. Returns `false` when another
    /// process took it meanwhile (the name is no longer this node's). Called with every
    /// heartbeat.
    async fn keep(&mut self) -> crate::error::Result<bool>;
}

/// `node_delete`: remove a node's row (clean shutdown, after its jobs were written back).
#[derive(Debug, Clone, Copy)]
pub struct NodeDeleteParams<'a> {
    /// Node name.
    pub node: &'a str,
}

/// `node_delete_stale`: forget the nodes that have not heartbeated for `older_than` (dead;
/// their names stay on their jobs' `attempted_by`). Returns how many went.
#[derive(Debug, Clone, Copy)]
pub struct NodeDeleteStaleParams {
    /// Silent this long: gone.
    pub older_than: std::time::Duration,
    /// Now.
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// `node_list`: every registered node, most recently seen first.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeListParams {}

/// A stable 64-bit hash of a node's name (FNV-1a), from which drivers derive the name of
/// its liveness lock: the same name gives the same lock in every process, on every
/// platform and version.
///
/// ```
/// assert_eq!(jobs_driver::node_lock_hash("a"), 0xaf63dc4c8601ec8c);
/// assert_ne!(jobs_driver::node_lock_hash("worker-1"), jobs_driver::node_lock_hash("worker-2"));
/// ```
pub fn node_lock_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
