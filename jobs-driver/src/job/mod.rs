//! Jobs as the engine and the drivers exchange them: a row to insert ([`NewJob`]), what an
//! insert did ([`Inserted`]), a stored row ([`JobRow`]), a claimed job and its outcome
//! ([`ClaimedJob`], [`Completion`]), the dashboard's filter ([`JobFilter`], [`Count`]), and
//! the parameters of every job operation.

mod execution;
mod filter;
mod params;

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::Value;

pub use execution::{ClaimedJob, Completion};
pub use filter::{Count, JobFilter};
pub use params::*;

use crate::state::JobState;
use crate::validation::{self, InvalidJob};

/// A job to insert, already encoded. Built by the typed enqueue API (`EnqueueRequest`);
/// build it directly to insert jobs of several kinds at once.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The job kind (borrowed for typed jobs: their kind is a constant).
    pub kind: Cow<'static, str>,
    /// The queue (borrowed when it is the kind's default).
    pub queue: Cow<'static, str>,
    /// The arguments as JSON text.
    pub args: String,
    /// Metadata as a JSON object's text (borrowed `{}` when there is none).
    pub meta: Cow<'static, str>,
    /// Tags (letters, digits and `_ - . : /`).
    pub tags: Vec<String>,
    /// Priority: lower runs first.
    pub priority: i16,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Per-attempt time limit in milliseconds.
    pub timeout_ms: Option<i64>,
    /// Run at this time (absolute).
    pub run_at: Option<DateTime<Utc>>,
    /// Run after this many milliseconds, counted on the database clock.
    pub delay_ms: Option<i64>,
    /// The uniqueness key's hash and the states in which it is unique.
    pub unique: Option<(Vec<u8>, Vec<JobState>)>,
}

/// The default number of attempts.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 20;

impl NewJob {
    /// A job of `kind` on `queue` with `args` (JSON text) and every other field at its
    /// default: no metadata or tags, priority 0, the default attempts, no timeout, due now.
    /// For rows that do not come from a typed job (the CLI, tests); typed jobs are built
    /// with `build`/`enqueue`, which also validate.
    pub fn new(kind: impl Into<String>, queue: impl Into<String>, args: impl Into<String>) -> NewJob {
        NewJob {
            kind: Cow::Owned(kind.into()),
            queue: Cow::Owned(queue.into()),
            args: args.into(),
            meta: Cow::Borrowed("{}"),
            tags: Vec::new(),
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            timeout_ms: None,
            run_at: None,
            delay_ms: None,
            unique: None,
        }
    }

    /// Checks the row against the rules of [`validation`]: names, tags, attempts,
    /// timeout, payloads, and a uniqueness key with at least one state.
    pub fn validate(&self) -> Result<(), InvalidJob> {
        validation::validate_kind(&self.kind)?;
        validation::validate_queue(&self.queue)?;
        validation::validate_max_attempts(self.max_attempts)?;
        validation::validate_timeout_ms(self.timeout_ms)?;
        for tag in &self.tags {
            validation::validate_tag(tag)?;
        }
        if self.unique.as_ref().is_some_and(|(_, states)| states.is_empty()) {
            return Err(InvalidJob::Option {
                option: "unique.states",
                reason: "uniqueness needs at least one state".into(),
            });
        }
        validation::validate_payload(&self.kind, "arguments", &self.args)?;
        validation::validate_payload(&self.kind, "metadata", &self.meta)
    }
}

/// What inserting one job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// The new job's id, or the id of the job that already held the uniqueness key.
    pub id: i64,
    /// `true` when nothing was inserted because a job with the same uniqueness key exists.
    pub existing: bool,
}

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
    /// One entry per failed attempt.
    pub errors: Value,
    /// What the handler returned.
    pub result: Option<Value>,
    /// When someone asked for the job to be cancelled.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Hash of its uniqueness key.
    pub unique_key: Option<Vec<u8>>,
    /// The states in which the key is unique.
    pub unique_states: Option<Vec<JobState>>,
}

impl JobRow {
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
