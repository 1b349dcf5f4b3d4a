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
    /// Members of this workflow or batch (`jobs.workflow_id`: its steps, or its members
    /// and callback), read through the index of members.
    pub workflow: Option<i64>,
    /// Arguments or metadata containing this JSON, e.g. `{"user_id": 7}` (drivers with
    /// [`Capability::JsonContainment`](crate::Capability::JsonContainment)).
    pub search: Option<serde_json::Value>,
    /// Created at or after.
    pub from: Option<DateTime<Utc>>,
    /// Created before.
    pub to: Option<DateTime<Utc>>,
    /// An attempt's error message or type contains this text, ignoring ASCII case (see
    /// [`like_pattern`]).
    pub error: Option<String>,
    /// Ids at least this: bounds a search that no index serves to a window of ids (the
    /// dashboard searches the newest jobs first, a window at a time).
    pub id_at_least: Option<i64>,
    /// The order of a list (newest first by default). A list's keyset cursor (`before`)
    /// is the last id of the previous page, whichever the order.
    pub order: JobOrder,
}

/// The order in which jobs are listed. By id is the order they were enqueued in; the
/// others follow a time and then the id, and a page's cursor is still the last id shown
/// (the next page starts after that job's time and id).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum JobOrder {
    /// Newest first: the next page holds smaller ids.
    #[default]
    NewestFirst,
    /// Oldest first: the next page holds larger ids.
    OldestFirst,
    /// The soonest due first (`scheduled_at`, then id). Index-backed for the waiting states
    /// ([`JobOrder::DUE_STATES`]).
    DueSoonest,
    /// The most recently finished first (`finalized_at`, then id, newest first); only
    /// finished jobs are listed. Index-backed for the finished states.
    RecentlyFinished,
}

impl JobOrder {
    /// Whether pages run from the newest (or most recently finished) job down: the next
    /// page's keys are smaller than the cursor's.
    pub fn descending(self) -> bool {
        matches!(self, JobOrder::NewestFirst | JobOrder::RecentlyFinished)
    }

    /// The states whose due time an index orders (scheduled and retryable jobs).
    pub const DUE_STATES: [JobState; 2] = [JobState::Scheduled, JobState::Retryable];

    /// Whether listing `states` in this order reads an index rather than sorting the table:
    /// always by id; by due time for scheduled and retryable jobs; by finish time for
    /// finished ones.
    pub fn served_for(self, states: &[JobState]) -> bool {
        match self {
            JobOrder::NewestFirst | JobOrder::OldestFirst => true,
            JobOrder::DueSoonest => !states.is_empty() && states.iter().all(|s| Self::DUE_STATES.contains(s)),
            JobOrder::RecentlyFinished => !states.is_empty() && states.iter().all(|s| s.is_final()),
        }
    }
}

/// `text` as a `LIKE` pattern that matches it anywhere: `%`, `_` and `\` escaped with a
/// backslash (every driver's `LIKE … ESCAPE '\'`), wrapped in `%`.
///
/// ```
/// assert_eq!(jobs_driver::like_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
/// ```
pub fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for ch in text.chars() {
        if matches!(ch, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern.push('%');
    pattern
}

/// Whether `doc` contains `subset` as Postgres's `jsonb @>` has it: an object contains an
/// object whose every key it holds with a contained value; an array contains an array whose
/// every element is contained in one of its own; other values contain an equal value. For
/// drivers that search JSON in Rust.
///
/// ```
/// use serde_json::json;
/// use jobs_driver::json_contains;
///
/// let args = json!({"user_id": 7, "tags": ["a", "b"], "plan": {"tier": "pro", "seats": 3}});
/// assert!(json_contains(&args, &json!({"user_id": 7, "plan": {"tier": "pro"}})));
/// assert!(json_contains(&args, &json!({"tags": ["b"]})));
/// assert!(!json_contains(&args, &json!({"user_id": 8})));
/// ```
pub fn json_contains(doc: &serde_json::Value, subset: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (doc, subset) {
        (Value::Object(doc), Value::Object(subset)) => {
            subset.iter().all(|(key, want)| doc.get(key).is_some_and(|have| json_contains(have, want)))
        }
        (Value::Array(doc), Value::Array(subset)) => {
            subset.iter().all(|want| doc.iter().any(|have| json_contains(have, want)))
        }
        (doc, subset) => doc == subset,
    }
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
