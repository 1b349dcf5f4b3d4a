//! A claimed job, and what happened to it.

use chrono::{DateTime, Utc};

use crate::state::JobState;

/// A job a worker has just claimed: everything needed to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedJob {
    /// Job id.
    pub id: i64,
    /// Kind name.
    pub kind: String,
    /// Queue.
    pub queue: String,
    /// Arguments, as JSON text (decoded by the job's descriptor).
    pub args: String,
    /// Metadata, as JSON text.
    pub meta: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Priority.
    pub priority: i16,
    /// This claim's attempt number (the fence for the outcome).
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Per-attempt limit.
    pub timeout_ms: Option<i64>,
    /// Insert time.
    pub created_at: DateTime<Utc>,
    /// When it became due.
    pub scheduled_at: DateTime<Utc>,
    /// This claim's time.
    pub attempted_at: DateTime<Utc>,
    /// The workflow it is a step of: its finish is settled at once for its dependents.
    pub workflow_id: Option<i64>,
}

/// What happened to one claimed job, to be written back by `job_complete_many`.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Job id.
    pub id: i64,
    /// Its queue (for the per-minute counters).
    pub queue: std::sync::Arc<str>,
    /// The workflow it is a step of ([`ClaimedJob::workflow_id`]): the completer settles
    /// its finish for its dependents at once.
    pub workflow_id: Option<i64>,
    /// The attempt it was claimed with: the write applies only if the row is still
    /// `running` at this attempt.
    pub attempt: i32,
    /// The new state: completed, retryable, scheduled (snoozed), available (handed back
    /// at shutdown), discarded or cancelled. A job whose cancellation was requested while
    /// it ran ends cancelled unless it completed.
    pub state: JobState,
    /// The result as JSON text.
    pub result: Option<String>,
    /// An entry to append to `errors`, as JSON text.
    pub error: Option<String>,
    /// Run again this long after now (retry backoff, snooze).
    pub delay_ms: Option<i64>,
    /// The run never started (a buffered job handed back, a kind this node does not know
    /// postponed): its attempt number is given back, and the next claim takes it again.
    pub give_back_attempt: bool,
    /// The run started but its attempt does not count (a snooze, a run stopped at
    /// shutdown): the attempt number stays — the next claim takes a new one, so that no
    /// attempt number ever runs twice — and one more attempt is allowed (`max_attempts`
    /// + 1).
    pub extra_attempt: bool,
    /// Delete the row instead of writing it (delete-on-completion queues, completed jobs).
    pub delete: bool,
    /// How the attempt ran, for the per-kind counters (`None`: it did not run, as for a
    /// buffered job handed back).
    pub timing: Option<Timing>,
}

impl Completion {
    /// How the outcome treats its attempt, as the completion statements take it: `0` it
    /// counts, `1` its number is given back ([`give_back_attempt`](Self::give_back_attempt)),
    /// `2` one more attempt is allowed ([`extra_attempt`](Self::extra_attempt)).
    pub fn attempt_change(&self) -> i16 {
        if self.give_back_attempt {
            1
        } else if self.extra_attempt {
            2
        } else {
            0
        }
    }
}

/// How long an attempt waited and ran, and its kind: what the per-kind counters add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The kind, as registered (`unknown` for a kind this node does not know).
    pub kind: &'static str,
    /// From due (`scheduled_at`) to claimed (`attempted_at`), in milliseconds.
    pub wait_ms: u64,
    /// How long the handler ran, in milliseconds.
    pub run_ms: u64,
}
