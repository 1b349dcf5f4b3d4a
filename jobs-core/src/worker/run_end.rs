//! What ended a run, and the row's next state it makes: the state, the delay before the
//! next attempt, and the `errors` entry.

use jobs_driver::stored_text::{MAX_BACKTRACE_BYTES, MAX_ERROR_MESSAGE_BYTES, clip, storable_result};
use jobs_driver::{ClaimedJob, Completion, JobRow, JobState};

use super::config::UnknownKindPolicy;
use super::running_jobs::StopReason;
use super::shared::{QueueRuntime, Shared};
use crate::outcome::{Failure, RunOutcome};
use crate::registry::JobDescriptor;

/// What ended the run, before it is turned into a state.
pub(super) enum Ended {
    /// The handler (and the run middleware around it) ended with this outcome: a timeout
    /// or a panic is a `Failed` one.
    Ran(RunOutcome),
    Stopped(StopReason),
    UnknownKind,
}

/// The `errors` entry of an attempt that did not complete (see `JobRow::errors`).
fn error_entry(shared: &Shared, job: &ClaimedJob, failure: &Failure) -> Option<serde_json::Value> {
    let entry = serde_json::json!({
        "attempt": job.attempt,
        "attempted_at": job.attempted_at,
        "at": shared.clock.now(),
        "node": &*shared.node,
        "error_type": clip(&failure.error_type, 1024),
        "message": clip(&failure.message, MAX_ERROR_MESSAGE_BYTES),
        "backtrace": failure.backtrace.as_deref().map(|b| clip(b, MAX_BACKTRACE_BYTES)),
    });
    Some(entry)
}

pub(super) fn failure(error_type: &str, message: String) -> Failure {
    Failure { message, error_type: error_type.to_owned(), backtrace: None }
}

/// Turns the end of a run into the row's next state.
pub(super) fn completion(
    shared: &Shared,
    queue: &QueueRuntime,
    job: &ClaimedJob,
    descriptor: Option<&JobDescriptor>,
    ended: Ended,
) -> Completion {
    let mut c = Completion {
        id: job.id,
        queue: queue.name.clone(),
        workflow_id: job.workflow_id,
        attempt: job.attempt,
        state: JobState::Completed,
        result: None,
        error: None,
        delay_ms: None,
        give_back_attempt: false,
        extra_attempt: false,
        delete: false,
        timing: None,
    };
    let mut entry = None;
    let failed = |c: &mut Completion, entry: &mut Option<serde_json::Value>, f: Failure| {
        *entry = error_entry(shared, job, &f);
        if job.attempt >= job.max_attempts {
            c.state = JobState::Discarded;
        } else {
            c.state = JobState::Retryable;
            let backoff = descriptor.map(|d| (d.options)().backoff).unwrap_or_default();
            c.delay_ms = Some(i64::try_from(backoff.delay(job.attempt).as_millis()).unwrap_or(i64::MAX));
        }
    };
    match ended {
        Ended::Ran(RunOutcome::Completed(result)) => {
            c.result = result.map(storable_result);
            c.delete = queue.config.delete_on_completion;
        }
        Ended::Ran(RunOutcome::Failed(f)) => failed(&mut c, &mut entry, f),
        Ended::UnknownKind => {
            let unknown = failure(
                "unknown_kind",
                format!("no job of kind `{}` is registered on node {}", job.kind, shared.node),
            );
            match shared.config.unknown_kinds {
                UnknownKindPolicy::HandBack { retry_in, give_up_after }
                    if shared.clock.now() - job.created_at
                        < chrono::TimeDelta::from_std(give_up_after).unwrap_or(chrono::TimeDelta::MAX) =>
                {
                    c.state = JobState::Scheduled;
                    c.delay_ms = Some(i64::try_from(retry_in.as_millis()).unwrap_or(i64::MAX));
                    c.give_back_attempt = true;
                }
                UnknownKindPolicy::HandBack { .. } | UnknownKindPolicy::Fail => {
                    failed(&mut c, &mut entry, unknown)
                }
                UnknownKindPolicy::Postpone(delay) => {
                    c.state = JobState::Scheduled;
                    c.delay_ms = Some(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
                    c.give_back_attempt = true;
                    entry = error_entry(shared, job, &unknown);
                }
            }
        }
        Ended::Ran(RunOutcome::Snoozed(delay)) => {
            c.state = JobState::Scheduled;
            c.delay_ms = Some(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX));
            c.extra_attempt = true;
            // Recorded (without a backtrace, about 200 bytes) so that the job's timeline
            // shows the snooze.
            let snoozed = failure(JobRow::SNOOZED, format!("snoozed for {}", humantime_ms(c.delay_ms)));
            entry = error_entry(shared, job, &snoozed);
        }
        Ended::Ran(RunOutcome::Cancelled(reason)) => {
            c.state = JobState::Cancelled;
            entry = error_entry(shared, job, &failure("cancelled", reason));
        }
        Ended::Ran(RunOutcome::Discarded(f)) => {
            c.state = JobState::Discarded;
            entry = error_entry(shared, job, &f);
        }
        Ended::Stopped(StopReason::Cancelled) | Ended::Stopped(StopReason::None) => {
            c.state = JobState::Cancelled;
            entry = error_entry(shared, job, &failure("cancelled", "cancelled while running".into()));
        }
        Ended::Stopped(StopReason::Shutdown) => {
            // Handed back without using up the attempt (its number stays: it ran); the
            // scheduler makes it available.
            c.state = JobState::Retryable;
            c.delay_ms = Some(0);
            c.extra_attempt = true;
            entry = error_entry(
                shared,
                job,
                &failure("shutdown", format!("node {} shut down before the job finished", shared.node)),
            );
        }
    }
    // An attempt that runs again says when, for the job's timeline.
    if let (Some(entry), Some(delay_ms)) = (entry.as_mut(), c.delay_ms) {
        let delay = chrono::TimeDelta::try_milliseconds(delay_ms).unwrap_or(chrono::TimeDelta::MAX);
        entry["retry_at"] = serde_json::json!(shared.clock.now().checked_add_signed(delay));
    }
    c.error = entry.map(|e| e.to_string());
    c
}

/// `1500` → `1.5s`: a delay as a snooze entry says it.
fn humantime_ms(ms: Option<i64>) -> String {
    let ms = ms.unwrap_or(0).max(0);
    if ms % 1000 == 0 { format!("{}s", ms / 1000) } else { format!("{:.1}s", ms as f64 / 1000.0) }
}
