//! The job state machine. Every driver stores it explicitly (Postgres as the `job_state`
//! enum); each variant documents which component moves a job into it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a job is in its life. Each variant names the component that moves a job into it.
///
/// ```text
///   enqueue with unfinished dependencies
///   ─────────► pending ──(its last dependency completed)──┐
///                 │ (a dependency failed: cancelled)       │
///            insert (run_at in the future)             snooze
///   enqueue ───────────────► scheduled ◄─────────────────────┐
///      │                        │ scheduler (due)            │
///      │ insert (due now)       ▼                            │
///      └───────────────────► available ──claim──► running ───┼──► completed
///                             ▲    ▲                │  │     ├──► cancelled
///                             │    │ scheduler      │  │     └──► discarded
///                             │    │ (due)          │  │
///                             │  retryable ◄─ error,┘  │
///                             │               shutdown │
///                             └─ rescuer (node dead, ──┘
///                                timed out): in place
/// ```
///
/// People (the dashboard, the CLI, `jobs_core::cancel_job` and `retry_job`, each through
/// the driver's `job_cancel_many` / `job_retry_many`) can also retry a job that is not
/// running (→ `available`), cancel one that is not finished (→ `cancelled`), and delete
/// one (`job_delete_many`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "postgres", derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow))]
#[cfg_attr(feature = "postgres", diesel(sql_type = crate::sql_types::PgJobState))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for other jobs (its dependencies in a workflow, or the members of the batch
    /// it is the callback of): never claimed. Set by enqueue of a job with unfinished
    /// dependencies. Left for `available` (or `scheduled`) when its last dependency has
    /// finished as it needs, for `cancelled` when a dependency failed in a workflow that
    /// cancels (see `docs/design/workflows.md`), or by a person's cancel or delete.
    Pending,
    /// Ready to run now. Set by enqueue (no future `run_at`), by the scheduler when a
    /// `scheduled` or `retryable` job falls due, by a manual retry, and by the rescuer for
    /// jobs whose node died or that ran past their timeout (in their place in line: priority
    /// and `scheduled_at` unchanged, the attempt used).
    Available,
    /// Waiting for its `scheduled_at`. Set by enqueue with a future `run_at`, and by the
    /// completer for a handler that snoozes (the attempt is given back).
    Scheduled,
    /// Claimed by a worker, which increments `attempt` and appends itself to
    /// `attempted_by`. Set only by the worker's claim (the driver's `job_claim`).
    Running,
    /// Failed an attempt and will run again after its backoff. Set by the worker's
    /// completer when a handler errs, panics or times out with attempts left, and by
    /// graceful shutdown when it hands back an unfinished job (attempt given back).
    Retryable,
    /// Finished successfully; `result` holds the handler's output. Set by the completer.
    /// Queues configured to delete on completion remove the row instead.
    Completed,
    /// Will not run again: out of attempts, arguments that no longer decode, or a handler
    /// that asked to discard. Set by the completer and the rescuer.
    Discarded,
    /// Stopped on purpose: by a handler returning `Outcome::Cancel`, or by a person or
    /// program cancelling it (`jobs_core::cancel_job`, the dashboard). Set by the completer or by
    /// the cancel query itself.
    Cancelled,
}

impl JobState {
    /// Every state, in the order of the Postgres enum (and of every driver's sort).
    pub const ALL: [JobState; 8] = [
        JobState::Pending,
        JobState::Available,
        JobState::Scheduled,
        JobState::Running,
        JobState::Retryable,
        JobState::Completed,
        JobState::Discarded,
        JobState::Cancelled,
    ];

    /// The states in which a job is not finished: waiting (for its dependencies, its time
    /// or a worker) or running.
    pub const UNFINISHED: [JobState; 5] =
        [JobState::Pending, JobState::Available, JobState::Scheduled, JobState::Running, JobState::Retryable];

    /// The default states of a uniqueness key: the unfinished states but `pending`. A job
    /// with dependencies may not carry a key (`docs/design/workflows.md`), and rows whose
    /// `unique_states` do not name the new state stay readable by nodes that predate it
    /// (a rolling upgrade).
    pub const DEFAULT_UNIQUE: [JobState; 4] =
        [JobState::Available, JobState::Scheduled, JobState::Running, JobState::Retryable];

    /// The states a job never leaves on its own.
    pub const FINAL: [JobState; 3] = [JobState::Completed, JobState::Discarded, JobState::Cancelled];

    /// The name stored by every driver and used in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Available => "available",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Retryable => "retryable",
            JobState::Completed => "completed",
            JobState::Discarded => "discarded",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether the job is finished (completed, discarded or cancelled).
    pub const fn is_final(self) -> bool {
        matches!(self, JobState::Completed | JobState::Discarded | JobState::Cancelled)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the job states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a job state (expected one of pending, available, scheduled, running, retryable, completed, discarded, cancelled)"
)]
pub struct ParseStateError(pub String);

impl FromStr for JobState {
    type Err = ParseStateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| ParseStateError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        assert!("done".parse::<JobState>().is_err());
    }

    #[test]
    fn final_states_are_the_finished_ones() {
        let finals: Vec<_> = JobState::ALL.into_iter().filter(|s| s.is_final()).collect();
        assert_eq!(finals, JobState::FINAL);
    }
}
