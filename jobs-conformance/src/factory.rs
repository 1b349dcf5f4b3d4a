//! The row factory: jobs in a given state, inserted through the driver's
//! `job_insert_full_many`, never through raw SQL. Every field has a default consistent
//! with the state (a running job has a claim time and a node, a finished one its finish
//! time); set what the case needs.

use chrono::{DateTime, Utc};
use jobs_core::driver::{Driver, JobInsertFull, JobInsertFullManyParams, JobState};
use serde_json::{Value, json};

/// A job to insert in a given state.
#[derive(Debug, Clone)]
pub struct JobFactory(JobInsertFull);

impl JobFactory {
    /// An available job of `kind` on queue `work` with arguments `{}`.
    pub fn new(kind: &str) -> JobFactory {
        JobFactory(JobInsertFull {
            kind: kind.to_owned(),
            queue: "work".to_owned(),
            state: JobState::Available,
            args: json!({}),
            meta: json!({}),
            tags: Vec::new(),
            priority: 0,
            attempt: 0,
            max_attempts: 20,
            timeout_ms: None,
            created_at: None,
            scheduled_at: None,
            attempted_at: None,
            finalized_at: None,
            attempted_by: Vec::new(),
            errors: Vec::new(),
            result: None,
            cancel_requested_at: None,
            unique: None,
        })
    }

    /// In `state` at `at`: a running job claimed then by node `node-x` at attempt 1, a
    /// finished one finalized then (after an attempt), a waiting one due then.
    pub fn state(mut self, state: JobState, at: DateTime<Utc>) -> JobFactory {
        self.0.state = state;
        match state {
            JobState::Running => {
                self.0.attempt = self.0.attempt.max(1);
                self.0.attempted_at = Some(at);
                if self.0.attempted_by.is_empty() {
                    self.0.attempted_by = vec!["node-x".to_owned()];
                }
            }
            JobState::Completed | JobState::Discarded | JobState::Cancelled => {
                self.0.attempt = self.0.attempt.max(1);
                self.0.attempted_at = Some(at);
                self.0.finalized_at = Some(at);
            }
            JobState::Pending | JobState::Available | JobState::Scheduled | JobState::Retryable => {
                self.0.scheduled_at = Some(at)
            }
        }
        self
    }

    /// Unique by `key` (its hash stands for it) in `states`.
    pub fn unique(mut self, key: &str, states: &[JobState]) -> JobFactory {
        self.0.unique = Some((key.as_bytes().to_vec(), states.to_vec()));
        self
    }

    /// On `queue`.
    pub fn queue(mut self, queue: &str) -> JobFactory {
        self.0.queue = queue.to_owned();
        self
    }

    /// With these arguments.
    pub fn args(mut self, args: Value) -> JobFactory {
        self.0.args = args;
        self
    }

    /// With this metadata.
    pub fn meta(mut self, meta: Value) -> JobFactory {
        self.0.meta = meta;
        self
    }

    /// With this tag.
    pub fn tag(mut self, tag: &str) -> JobFactory {
        self.0.tags.push(tag.to_owned());
        self
    }

    /// At this priority.
    pub fn priority(mut self, priority: i16) -> JobFactory {
        self.0.priority = priority;
        self
    }

    /// At this attempt, of `max_attempts`.
    pub fn attempts(mut self, attempt: i32, max_attempts: i32) -> JobFactory {
        self.0.attempt = attempt;
        self.0.max_attempts = max_attempts;
        self
    }

    /// Claimed by `node` (its latest claim).
    pub fn claimed_by(mut self, node: &str) -> JobFactory {
        self.0.attempted_by = vec![node.to_owned()];
        self
    }

    /// With a per-attempt limit.
    pub fn timeout_ms(mut self, ms: i64) -> JobFactory {
        self.0.timeout_ms = Some(ms);
        self
    }

    /// Records a failed attempt with this error type and message.
    pub fn error(mut self, error_type: &str, message: &str) -> JobFactory {
        let attempt = self.0.errors.len() + 1;
        self.0.errors.push(serde_json::json!({
            "attempt": attempt, "at": "2026-11-22T10:00:00Z", "node": "node-a",
            "error_type": error_type, "message": message,
        }));
        self
    }

    /// With a cancellation requested at `at` (a running job's node is to stop it).
    pub fn cancel_requested(mut self, at: DateTime<Utc>) -> JobFactory {
        self.0.cancel_requested_at = Some(at);
        self
    }

    /// With these error entries already recorded.
    pub fn errors(mut self, errors: Vec<Value>) -> JobFactory {
        self.0.errors = errors;
        self
    }

    /// Created at `at`.
    pub fn created_at(mut self, at: DateTime<Utc>) -> JobFactory {
        self.0.created_at = Some(at);
        self
    }

    /// The row.
    pub fn build(self) -> JobInsertFull {
        self.0
    }

    /// Inserts the job; returns its id.
    pub async fn insert(self, driver: &dyn Driver) -> i64 {
        insert_all(driver, vec![self]).await[0]
    }
}

/// Inserts every job in one batch; returns their ids in order.
pub async fn insert_all(driver: &dyn Driver, jobs: Vec<JobFactory>) -> Vec<i64> {
    let rows: Vec<JobInsertFull> = jobs.into_iter().map(JobFactory::build).collect();
    driver
        .job_insert_full_many(JobInsertFullManyParams { jobs: &rows })
        .await
        .expect("insert the factory's rows")
}

/// The outcome of a claimed job that succeeded with no result, as a worker reports it.
pub fn succeeded(id: i64, queue: &str, attempt: i32) -> jobs_core::driver::Completion {
    jobs_core::driver::Completion {
        id,
        queue: queue.into(),
        workflow_id: None,
        attempt,
        state: JobState::Completed,
        result: None,
        error: None,
        delay_ms: None,
        give_back_attempt: false,
        extra_attempt: false,
        delete: false,
        timing: None,
    }
}
