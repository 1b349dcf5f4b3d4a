//! A simulated node's runs, and the outcome it writes when one ends, as a worker does.

use jobs_core::driver::{Completion, JobState};

use super::ops::Ending;

/// A run a simulated node holds.
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) job: i64,
    pub(super) attempt: i32,
    pub(super) max_attempts: i32,
    pub(super) queue: String,
    pub(super) started: bool,
    /// Its handler returned; the outcome is not written yet (the node's claims leave the
    /// run out of what runs: `JobClaimParams::ended`).
    pub(super) ended: bool,
}

impl Node {
    /// The runs whose handler returned and whose outcome waits, as (job, attempt).
    pub(super) fn ended(&self) -> Vec<(i64, i32)> {
        self.runs.iter().filter(|r| r.ended).map(|r| (r.job, r.attempt)).collect()
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    pub(super) alive: bool,
    pub(super) runs: Vec<Run>,
}

/// The outcome a worker writes for `run` ending so.
pub(super) fn completion(run: &Run, ending: Ending) -> Completion {
    let mut c = Completion {
        id: run.job,
        queue: run.queue.as_str().into(),
        workflow_id: None,
        attempt: run.attempt,
        state: JobState::Completed,
        result: None,
        error: None,
        delay_ms: None,
        give_back_attempt: false,
        extra_attempt: false,
        delete: false,
        timing: None,
    };
    let entry = |kind: &str| {
        Some(serde_json::json!({"attempt": run.attempt, "error_type": kind, "message": kind}).to_string())
    };
    match ending {
        Ending::Succeed => {}
        Ending::Fail if run.attempt >= run.max_attempts => {
            (c.state, c.error) = (JobState::Discarded, entry("failed"))
        }
        Ending::Fail => (c.state, c.error, c.delay_ms) = (JobState::Retryable, entry("failed"), Some(1_000)),
        Ending::Snooze => {
            (c.state, c.error, c.delay_ms, c.extra_attempt) =
                (JobState::Scheduled, entry("snoozed"), Some(2_000), true)
        }
        Ending::Cancel => (c.state, c.error) = (JobState::Cancelled, entry("cancelled")),
        Ending::Discard => (c.state, c.error) = (JobState::Discarded, entry("refused")),
        Ending::HandBack => (c.state, c.give_back_attempt) = (JobState::Available, true),
        Ending::Stop => {
            (c.state, c.error, c.delay_ms, c.extra_attempt) =
                (JobState::Retryable, entry("shutdown"), Some(0), true)
        }
    }
    c
}
