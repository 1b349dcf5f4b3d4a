//! Assertions on enqueued jobs, for users' tests: [`assert_enqueued`], [`refute_enqueued`].

use jobs_driver::{Driver, JobListWaitingParams, JobRow};
use serde::Serialize;

use crate::into_driver::IntoDriver;
use crate::job::Job;

/// What an enqueued job must look like: its kind, and optionally a subset of its
/// arguments and its queue. Build with [`Expected::job`] or [`Expected::kind`].
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    kind: String,
    queue: Option<String>,
    args: Option<serde_json::Value>,
}

impl Expected {
    /// A job of `J`'s kind.
    pub fn job<J: Job>() -> Expected {
        Expected::kind(J::KIND)
    }

    /// A job of this kind name.
    pub fn kind(kind: impl Into<String>) -> Expected {
        Expected { kind: kind.into(), queue: None, args: None }
    }

    /// Whose arguments contain these fields (JSON containment: `json!({"user_id": 7})`
    /// matches `{"user_id": 7, "email": ...}`). Panics if `subset` does not serialize.
    pub fn args(mut self, subset: impl Serialize) -> Expected {
        match serde_json::to_value(subset) {
            Ok(value) => self.args = Some(value),
            Err(e) => panic!("Expected::args: the subset does not serialize to JSON: {e}"),
        }
        self
    }

    /// On this queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Expected {
        self.queue = Some(queue.into());
        self
    }
}

async fn matching(driver: &dyn Driver, expected: &Expected) -> Vec<JobRow> {
    let params = JobListWaitingParams {
        kind: Some(&expected.kind),
        queue: expected.queue.as_deref(),
        args: expected.args.as_ref(),
    };
    match driver.job_list_waiting(params).await {
        Ok(rows) => rows,
        Err(e) => panic!("reading the enqueued jobs failed: {e}"),
    }
}

/// Fails the test unless a job matching `expected` is waiting to run (available,
/// scheduled or retryable); returns the oldest match. The failure lists the waiting jobs
/// of that kind. `db` is a driver or a pool (`&pool`).
pub async fn assert_enqueued(db: impl IntoDriver, expected: &Expected) -> JobRow {
    let driver = db.into_driver();
    if let Some(row) = matching(&*driver, expected).await.into_iter().next() {
        return row;
    }
    let same_kind = matching(&*driver, &Expected::kind(expected.kind.clone())).await;
    let seen: Vec<String> =
        same_kind.iter().map(|r| format!("  #{} queue {} args {}", r.id, r.queue, r.args)).collect();
    panic!(
        "no enqueued job matches {expected:?}; waiting jobs of kind `{}`:\n{}",
        expected.kind,
        if seen.is_empty() { "  (none)".to_owned() } else { seen.join("\n") }
    );
}

/// Fails the test if a job matching `expected` is waiting to run. `db` is a driver or a
/// pool (`&pool`).
pub async fn refute_enqueued(db: impl IntoDriver, expected: &Expected) {
    let found = matching(&*db.into_driver(), expected).await;
    if let Some(row) = found.first() {
        panic!("expected no enqueued job matching {expected:?}, found #{} with args {}", row.id, row.args);
    }
}
