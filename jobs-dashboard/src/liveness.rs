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
