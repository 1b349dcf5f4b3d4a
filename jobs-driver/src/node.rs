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
    /// The heartbeat's time.
    pub now: Option<DateTime<Utc>>,
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
