//! Running claimed jobs: one task per busy slot runs a job (decode, run under its
//! timeout, catch panics, honour cancellation, turn what happened into a [`Completion`]),
//! then the next buffered one, until the buffer is empty. A job's timeout starts when its
//! run does, not when it was claimed.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use jobs_driver::stored_text::{MAX_BACKTRACE_BYTES, MAX_ERROR_MESSAGE_BYTES, clip, storable_result};
use jobs_driver::{ClaimedJob, Completion, JobRow, JobState, Timing};
use serde_json::value::RawValue;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::buffer::Buffered;
use super::config::UnknownKindPolicy;
use super::panic_capture;
use super::running_jobs::{RunningJob, StopReason};
use super::shared::{QueueRuntime, Shared};
use crate::job_context::{ContextParts, JobContext};
use crate::middleware::{JobRun, Next};
use crate::outcome::{Failure, RunOutcome};
use crate::registry::JobDescriptor;

/// What ended the run, before it is turned into a state.
enum Ended {
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

fn failure(error_type: &str, message: String) -> Failure {
    Failure { message, error_type: error_type.to_owned(), backtrace: None }
}

/// Turns the end of a run into the row's next state.
fn completion(
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

/// Records a claimed job as held by this node (the orphan check leaves it alone) and
/// gives it the handle a cancellation request reaches it by. Every claimed job goes
/// through here before it is buffered or started.
pub(crate) fn hold(shared: &Shared, job: ClaimedJob) -> Buffered {
    let running = RunningJob::new();
    let run = (job.id, job.attempt);
    shared.running.lock().unwrap_or_else(|e| e.into_inner()).insert(run, running.clone());
    shared.held.lock().unwrap_or_else(|e| e.into_inner()).insert(run);
    Buffered { job, running, since: std::time::Instant::now() }
}

/// Gives a buffered job back to the queue (see [`Buffered::hand_back`]): it is no longer
/// this node's.
pub(crate) async fn give_back(shared: &Shared, b: Buffered) {
    shared.running.lock().unwrap_or_else(|e| e.into_inner()).remove((b.job.id, b.job.attempt));
    shared.completions.submit(b.hand_back()).await;
}

/// Spawns the task that runs `first` holding `permit` (a concurrency slot), then the
/// queue's buffered jobs one after another while any wait, and frees the slot when none
/// is left. Each outcome goes to the completer as soon as its job ends.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    queue: Arc<QueueRuntime>,
    first: Buffered,
    permit: OwnedSemaphorePermit,
) {
    let tracker = shared.tracker.clone();
    tracker.spawn(async move {
        let mut next = Some((first, permit));
        while let Some((Buffered { job, running, since }, permit)) = next {
            // A job that waited too long goes back rather than start: its row reads as
            // claimed when it was buffered, and the rescuer's timeout check counts from then.
            if since.elapsed() > shared.config.prefetch_max_wait {
                give_back(&shared, Buffered { job, running, since }).await;
                next = queue.next_or_free(permit);
                continue;
            }
            let span = tracing::info_span!("job", job.id = job.id, job.kind = %job.kind, job.attempt = job.attempt, job.queue = %job.queue);
            let completion = execute(&shared, &queue, &job, &running).instrument(span).await;
            shared.running.lock().unwrap_or_else(|e| e.into_inner()).remove((job.id, job.attempt));
            // A hand-back (a kind this node does not run) gives its attempt number back: the
            // next claim runs the job at the same one, which must count.
            if !completion.give_back_attempt {
                queue.run_ended((job.id, job.attempt));
            }
            shared.completions.submit(completion).await;
            next = queue.next_or_free(permit);
        }
    });
}

/// Runs `job` to its end (decode, handler under timeout, panics caught, cancellation)
/// and returns the outcome to write, recording the metrics and the log line. Shared by the
/// spawned executor task and [`Worker::drain`](super::Worker::drain).
pub(crate) async fn execute(
    shared: &Shared,
    queue: &QueueRuntime,
    job: &ClaimedJob,
    running: &RunningJob,
) -> Completion {
    let latency = (job.attempted_at - job.scheduled_at).to_std().unwrap_or_default();
    ::metrics::histogram!(crate::metrics::QUEUE_LATENCY, "queue" => queue.label)
        .record(latency.as_secs_f64());
    // One registry lookup per job, shared by the run, the backoff and the labels.
    let descriptor = shared.registry.get(&job.kind).copied();
    let started = Instant::now();
    let ended = run(shared, queue, job, descriptor.as_ref(), running).await;
    // The buffer is sized from handlers' run times: a job stopped before it ran, or one
    // that never reached its handler, says nothing about them.
    if matches!(ended, Ended::Ran(_)) {
        queue.run_time.record(started.elapsed());
    }
    let kind_label: &'static str = descriptor.map_or("unknown", |d| d.kind);
    ::metrics::histogram!(crate::metrics::DURATION, "queue" => queue.label, "kind" => kind_label)
        .record(started.elapsed().as_secs_f64());
    // Every attempt whose handler started counts for its kind (a cancelled one too).
    let ran = matches!(ended, Ended::Ran(_) | Ended::Stopped(StopReason::Cancelled | StopReason::None));
    let mut completion = completion(shared, queue, job, descriptor.as_ref(), ended);
    if ran {
        completion.timing = Some(Timing {
            kind: kind_label,
            wait_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            run_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
    }
    let counter = match completion.state {
        JobState::Completed => crate::metrics::COMPLETED,
        JobState::Discarded => crate::metrics::DISCARDED,
        JobState::Cancelled => crate::metrics::CANCELLED,
        JobState::Scheduled => crate::metrics::SNOOZED,
        _ => crate::metrics::FAILED,
    };
    ::metrics::counter!(counter, "queue" => queue.label, "kind" => kind_label).increment(1);
    match completion.state {
        // Said as what it is, not as "ended state=scheduled" every few seconds.
        JobState::Scheduled if descriptor.is_none() => tracing::warn!(
            kind = %job.kind,
            registered = ?shared.registry.kinds(),
            "no job of this kind is registered on this node: handed back to wait for a node that registers it \
             (UnknownKindPolicy); check the kind's spelling and which version each node runs"
        ),
        JobState::Completed => tracing::debug!("completed"),
        JobState::Retryable | JobState::Discarded => {
            // One line: the type and message. The backtrace is kept in the job's errors (the
            // dashboard shows it); in the log it would read like the process crashing.
            let entry: Option<serde_json::Value> =
                completion.error.as_deref().and_then(|e| serde_json::from_str(e).ok());
            let field = |name: &str| {
                entry.as_ref().and_then(|e| e.get(name)).and_then(|v| v.as_str()).unwrap_or("").to_owned()
            };
            let message = field("message");
            let message = message.lines().next().unwrap_or("");
            tracing::warn!(error_type = %field("error_type"), error = message, state = %completion.state, "attempt failed")
        }
        state => tracing::info!(%state, "ended"),
    }
    completion
}

async fn run(
    shared: &Shared,
    queue: &QueueRuntime,
    job: &ClaimedJob,
    descriptor: Option<&JobDescriptor>,
    running: &RunningJob,
) -> Ended {
    let Some(descriptor) = descriptor else {
        return Ended::UnknownKind;
    };
    let meta = RawValue::from_string(job.meta.clone()).unwrap_or_default();
    let ctx = JobContext::new(ContextParts {
        id: job.id,
        kind: descriptor.kind,
        queue: queue.name.clone(),
        attempt: job.attempt,
        max_attempts: job.max_attempts,
        priority: job.priority,
        meta,
        tags: job.tags.clone(),
        node: shared.node.clone(),
        created_at: job.created_at,
        cancel: running.token.clone(),
        driver: Some(shared.driver.clone()),
        data: shared.data.clone(),
    });
    let args = match serde_json::from_str::<&RawValue>(&job.args) {
        Ok(args) => args,
        Err(e) => {
            return Ended::Ran(RunOutcome::Discarded(failure(
                "invalid_args",
                format!("the stored arguments are not valid JSON: {e}"),
            )));
        }
    };
    let timeout = job.timeout_ms.and_then(|ms| u64::try_from(ms).ok()).map(Duration::from_millis);
    let timed_out = AtomicBool::new(false);
    // The run middleware sees the context the handler gets (a clone: one `Arc`).
    let seen = (!shared.middleware.is_empty()).then(|| ctx.clone());
    let handler = handle(descriptor, ctx, args, timeout, &timed_out);
    let outcome = async {
        let Some(context) = &seen else { return handler.await };
        let view = JobRun { context, args };
        let chain = Next::new(&shared.middleware, &view, Box::pin(handler)).run();
        // A middleware's panic fails the attempt, as a handler's does.
        match AssertUnwindSafe(panic_capture::Caught(Box::pin(chain))).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => RunOutcome::Failed(panic_failure(payload.as_ref())),
        }
    };
    tokio::select! {
        biased;
        _ = running.token.cancelled() => Ended::Stopped(running.reason()),
        outcome = outcome => {
            // Cancelled after the chain ended, not as the handler timed out: a middleware
            // still running would read as stopped by a cancel.
            if timed_out.load(Ordering::Relaxed) {
                running.token.cancel();
            }
            Ended::Ran(outcome)
        }
    }
}

/// The handler: decodes the arguments and runs under the job's timeout; a panic or the
/// timeout is the attempt's failure (`timed_out` says which was the timeout).
async fn handle(
    descriptor: &JobDescriptor,
    ctx: JobContext,
    args: &RawValue,
    timeout: Option<Duration>,
    timed_out: &AtomicBool,
) -> RunOutcome {
    // The descriptor decodes the arguments before it returns the future; a panic there is
    // caught like one in the handler.
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| {
        panic_capture::caught(|| (descriptor.run)(ctx, args))
    })) {
        Ok(future) => future,
        Err(payload) => return RunOutcome::Failed(panic_failure(payload.as_ref())),
    };
    let guarded = AssertUnwindSafe(panic_capture::Caught(future)).catch_unwind();
    let result = match timeout {
        Some(limit) => match tokio::time::timeout(limit, guarded).await {
            Ok(result) => result,
            Err(_) => {
                timed_out.store(true, Ordering::Relaxed);
                return RunOutcome::Failed(failure(
                    "timeout",
                    format!("the attempt exceeded its {limit:?} timeout"),
                ));
            }
        },
        None => guarded.await,
    };
    match result {
        Ok(outcome) => outcome,
        Err(payload) => RunOutcome::Failed(panic_failure(payload.as_ref())),
    }
}

fn panic_failure(payload: &(dyn std::any::Any + Send)) -> Failure {
    Failure {
        message: format!("panicked: {}", panic_capture::message(payload)),
        error_type: "panic".into(),
        backtrace: panic_capture::take_backtrace(),
    }
}
