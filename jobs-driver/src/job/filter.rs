//! What the dashboard and the CLI select jobs by, and how many they found.

use chrono::{DateTime, Utc};

use crate::state::JobState;

/// A selection of jobs: every condition given must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    /// Any of these states (all when empty).
    pub states: Vec<JobState>,
    /// Exactly this queue.
    pub queue: Option<String>,
    /// Exactly this kind.
    pub kind: Option<String>,
    /// Having this tag.
    pub tag: Option<String>,
    /// Arguments or metadata containing this JSON, e.g. `{"user_id": 7}` (drivers with
    /// [`Capability::JsonContainment`](crate::Capability::JsonContainment)).
    pub search: Option<serde_json::Value>,
    /// Created at or after.
    pub from: Option<DateTime<Utc>>,
    /// Created before.
    pub to: Option<DateTime<Utc>>,
}

/// A count: exact up to a cap, and past it an estimate or a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Counted.
    Exact(i64),
    /// More than the cap; the planner estimates this many (drivers with
    /// [`Capability::CountEstimates`](crate::Capability::CountEstimates)).
    Estimate(i64),
    /// More than this many (the cap), with no estimate of how many more.
    AtLeast(i64),
}

impl Count {
    /// The number: exact, estimated, or the bound.
    pub fn value(self) -> i64 {
        match self {
            Count::Exact(n) | Count::Estimate(n) | Count::AtLeast(n) => n,
        }
    }
}
