//! A stored job, and the invariants it must keep.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::state::JobState;
use crate::validation;

/// A job row as stored, every column.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// The job's id.
    pub id: i64,
    /// Its state.
    pub state: JobState,
    /// The queue it runs on.
    pub queue: String,
    /// Its kind (which registered job runs it).
    pub kind: String,
    /// Its arguments.
    pub args: Value,
    /// Application metadata.
    pub meta: Value,
    /// Tags.
    pub tags: Vec<String>,
    /// Priority: lower runs first.
    pub priority: i16,
    /// Claims so far.
    pub attempt: i32,
    /// Claims allowed before it is discarded.
    pub max_attempts: i32,
    /// Per-attempt time limit in milliseconds.
    pub timeout_ms: Option<i64>,
    /// When it was inserted.
    pub created_at: DateTime<Utc>,
    /// When it is (or was) due.
    pub scheduled_at: DateTime<Utc>,
    /// When its latest attempt started.
    pub attempted_at: Option<DateTime<Utc>>,
    /// When it reached a final state.
    pub finalized_at: Option<DateTime<Utc>>,
    /// The node of each claim, oldest first.
    pub attempted_by: Vec<String>,
    /// One entry per attempt that did not complete, oldest first: `attempt`, `attempted_at`,
    /// `at`, `node`, `error_type`, `message`, `backtrace`, and `retry_at` when it runs again.
    /// Failures, hand-backs on shutdown, and snoozes ([`JobRow::SNOOZED`]).
    pub errors: Value,
    /// What the handler returned.
    pub result: Option<Value>,
    /// When someone asked for the job to be cancelled.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Hash of its uniqueness key.
    pub unique_key: Option<Vec<u8>>,
    /// The states in which the key is unique.
    pub unique_states: Option<Vec<JobState>>,
    /// The workflow it is a step of.
    pub workflow_id: Option<i64>,
}

/// The most `errors` entries a job keeps from attempts it gave back (snoozes, a kind no
/// node knows yet, hand-backs at shutdown): past it, such attempts add none, so a job that
/// snoozes every few seconds for days does not grow without bound. Failures are always
/// kept. The same number, as an SQL literal: [`max_given_back_entries!`](crate::max_given_back_entries).
pub const MAX_GIVEN_BACK_ENTRIES: usize = 20;

/// [`MAX_GIVEN_BACK_ENTRIES`] as a string literal, for the drivers' `concat!`-built SQL.
#[macro_export]
macro_rules! max_given_back_entries {
    () => {
        "20"
    };
}

impl JobRow {
    /// The `error_type` of an `errors` entry that records a snooze, not a failure: the
    /// attempt asked to run again later (its attempt was given back).
    pub const SNOOZED: &'static str = "snoozed";

    /// The `errors` entries that record failures (snoozes left out), oldest first.
    pub fn failures(&self) -> impl Iterator<Item = &Value> {
        self.errors
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e.get("error_type").and_then(|t| t.as_str()) != Some(Self::SNOOZED))
    }

    /// The rules of [`validation`] this stored row breaks, and the invariants the writers
    /// keep: a negative attempt, errors that are not a JSON array, a running job without
    /// its claim time, a finished job without its finish time, a uniqueness key without
    /// its states (or the reverse). Empty for a sound row. The fault tests assert that no
    /// row breaks one after kills and restarts.
    pub fn invariant_violations(&self) -> Vec<String> {
        let mut broken: Vec<String> = [
            validation::validate_queue(&self.queue),
            validation::validate_kind(&self.kind),
            validation::validate_max_attempts(self.max_attempts),
            validation::validate_timeout_ms(self.timeout_ms),
        ]
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.to_string()))
        .collect();
        if self.attempt < 0 {
            broken.push(format!("negative attempt {}", self.attempt));
        }
        if !self.errors.is_array() {
            broken.push("errors is not a JSON array".into());
        }
        if self.state == JobState::Running && self.attempted_at.is_none() {
            broken.push("running without attempted_at".into());
        }
        if self.state.is_final() && self.finalized_at.is_none() {
            broken.push("finished without finalized_at".into());
        }
        if self.unique_key.is_some() != self.unique_states.is_some() {
            broken.push("unique_key and unique_states are not both set or both empty".into());
        }
        broken
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sql_literal_is_the_constant() {
        assert_eq!(crate::max_given_back_entries!(), super::MAX_GIVEN_BACK_ENTRIES.to_string());
    }
}
