//! Which nodes are live, and so which queues someone serves: one rule for every page.

use chrono::{DateTime, TimeDelta, Utc};
use jobs_core::driver::{NodeRow, QueueDepth};

/// How long a node may go without a heartbeat and still count as live.
pub(crate) const LIVE_NODE: TimeDelta = TimeDelta::seconds(30);

/// Whether `node` has sent a heartbeat recently enough to count as live at `now`.
pub(crate) fn is_live(node: &NodeRow, now: DateTime<Utc>) -> bool {
    now - node.heartbeat_at < LIVE_NODE
}

/// What is happening to a queue, as its state column says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueStatus {
    /// Paused: no node starts its jobs.
    Paused,
    /// This many live nodes run it.
    Served(usize),
    /// No live node runs it: its jobs wait until one starts.
    Unserved,
}

impl QueueStatus {
    /// A short label.
    pub(crate) fn label(self) -> String {
        match self {
            QueueStatus::Paused => "paused".into(),
            QueueStatus::Served(1) => "running on 1 node".into(),
            QueueStatus::Served(n) => format!("running on {n} nodes"),
            QueueStatus::Unserved => "no node serves it".into(),
        }
    }

    /// The CSS class of its badge.
    pub(crate) fn class(self) -> &'static str {
        match self {
            QueueStatus::Paused => "paused",
            QueueStatus::Served(_) => "served",
            QueueStatus::Unserved => "unserved",
        }
    }
}

/// A queue's depth with its status.
pub(crate) struct QueueLine {
    /// Counts by state, latency, paused.
    pub(crate) depth: QueueDepth,
    /// Paused, served, or not served.
    pub(crate) status: QueueStatus,
}

/// Each queue with its status, from the live nodes' declared queues.
pub(crate) fn queue_lines(depths: Vec<QueueDepth>, nodes: &[NodeRow], now: DateTime<Utc>) -> Vec<QueueLine> {
    depths
        .into_iter()
        .map(|depth| {
            let serving =
                nodes.iter().filter(|n| is_live(n, now) && n.queues.get(&depth.queue).is_some()).count();
            let status = if depth.paused {
                QueueStatus::Paused
            } else if serving == 0 {
                QueueStatus::Unserved
            } else {
                QueueStatus::Served(serving)
            };
            QueueLine { depth, status }
        })
        .collect()
}

/// A kind some live node runs.
pub(crate) struct KindChoice {
    pub(crate) kind: String,
    /// The queues live nodes that run it serve.
    pub(crate) queues: Vec<String>,
    /// Its options (`#[job(...)]`): its registry entry's in this process, or else as its
    /// most recently started live node publishes them; `None` when neither has them (a node
    /// of an earlier version).
    pub(crate) options: Option<jobs_core::JobOptions>,
}

impl KindChoice {
    /// The queue the kind names, when its options are known.
    pub(crate) fn default_queue(&self) -> Option<&str> {
        self.options.as_ref().map(|o| o.queue.as_ref())
    }
}

/// The kinds live nodes run, by name, with the queues those nodes serve and the kinds'
/// options: what the enqueue form offers and the command line checks, and what both
/// enqueue a kind with.
pub(crate) async fn live_kinds(driver: &dyn jobs_core::driver::Driver) -> jobs_core::Result<Vec<KindChoice>> {
    let now = Utc::now();
    let mut kinds: std::collections::BTreeMap<String, KindChoice> = std::collections::BTreeMap::new();
    let mut nodes =
        driver.node_list(jobs_core::driver::NodeListParams {}).await.map_err(jobs_core::Error::from)?;
    let local = jobs_core::Registry::from_inventory().ok();
    // Most recently started first: in a rolling deploy, the newest process's options win.
    nodes.sort_by_key(|n| std::cmp::Reverse(n.started_at));
    for node in nodes {
        if !is_live(&node, now) {
            continue;
        }
        let queues: Vec<String> =
            node.queues.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
        for kind in &node.kinds {
            let entry = kinds.entry(kind.clone()).or_insert_with(|| KindChoice {
                kind: kind.clone(),
                queues: Vec::new(),
                options: local.as_ref().and_then(|r| r.get(kind)).map(|d| (d.options)()),
            });
            if entry.options.is_none() {
                entry.options = node.kind_options.get(kind).and_then(jobs_core::JobOptions::from_published);
            }
            for q in &queues {
                if !entry.queues.contains(q) {
                    entry.queues.push(q.clone());
                }
            }
        }
    }
    Ok(kinds
        .into_values()
        .map(|mut choice| {
            choice.queues.sort();
            choice
        })
        .collect())
}
