//! Running claimed jobs: one task per busy slot runs a job (decode, run under its
//! timeout, catch panics, honour cancellation, turn what happened into a [`Completion`]),
//! then the next buffered one, until the buffer is empty. A job's timeout starts when its
//! run does, not when it was claimed.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::FutureExt;
use jobs_driver::{ClaimedJob, Completion, JobState, Timing};
use serde_json::value::RawValue;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use super::buffer::Buffered;
use super::panic_capture;
use super::run_end::{Ended, completion, failure};
use super::running_jobs::{RunningJob, StopReason};
use super::shared::{QueueRuntime, Shared};
use crate::job_context::{ContextParts, JobContext};
use crate::middleware::{JobRun, Next};
use crate::outcome::{Failure, RunOutcome};
use crate::registry::JobDescriptor;

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
            #[cfg(not(feature = "opentelemetry"))]
            let span = tracing::info_span!("job", job.id = job.id, job.kind = %job.kind, job.attempt = job.attempt, job.queue = %job.queue);
            #[cfg(feature = "opentelemetry")]
            let span = crate::telemetry::job_span(&job);
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
    let (ended, handler_ran) = run(shared, queue, job, descriptor.as_ref(), running).await;
    // The buffer is sized from handlers' run times: a job stopped before it ran, or one
    // that never reached its handler (a middleware refused it), says nothing about them.
    if matches!(ended, Ended::Ran(_)) && handler_ran {
        queue.run_time.record(started.elapsed());
    }
    let kind_label: &'static str = descriptor.map_or("unknown", |d| d.kind);
    ::metrics::histogram!(crate::metrics::DURATION, "queue" => queue.label, "kind" => kind_label)
        .record(started.elapsed().as_secs_f64());
    // Every attempt that ended with an outcome counts for its kind (one a middleware
    // refused too, and one cancelled while it ran).
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

/// Runs `job` through the run middleware and its handler, or stops it when its token is
/// cancelled; what ended it, and whether its handler started.
async fn run(
    shared: &Shared,
    queue: &QueueRuntime,
    job: &ClaimedJob,
    descriptor: Option<&JobDescriptor>,
    running: &RunningJob,
) -> (Ended, bool) {
    let Some(descriptor) = descriptor else {
        return (Ended::UnknownKind, false);
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
            let invalid = failure("invalid_args", format!("the stored arguments are not valid JSON: {e}"));
            return (Ended::Ran(RunOutcome::Discarded(invalid)), false);
        }
    };
    let timeout = job.timeout_ms.and_then(|ms| u64::try_from(ms).ok()).map(Duration::from_millis);
    // The run middleware sees the context the handler gets (a clone: one `Arc`).
    let seen = (!shared.middleware.is_empty()).then(|| ctx.clone());
    let state = HandlerState { keep: seen.is_some(), ..HandlerState::default() };
    let handler = handle(descriptor, ctx, args, timeout, &state);
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
    let ended = tokio::select! {
        biased;
        // A handler that ended while a middleware still ran after it: its outcome stands
        // (handed back, the job would run again).
        _ = running.token.cancelled() => match state.ended.get() {
            Some(outcome) => Ended::Ran(outcome.clone()),
            None => Ended::Stopped(running.reason()),
        },
        outcome = outcome => {
            // Cancelled after the chain ended, not as the handler timed out: a middleware
            // still running would read as stopped by a cancel.
            if state.timed_out.load(Ordering::Relaxed) {
                running.token.cancel();
            }
            Ended::Ran(outcome)
        }
    };
    (ended, state.started.load(Ordering::Relaxed))
}

/// What the handler did, for the run around it.
#[derive(Default)]
struct HandlerState {
    /// Keep the handler's outcome in `ended` (a middleware runs around it).
    keep: bool,
    /// The handler started.
    started: AtomicBool,
    /// It ran out of time.
    timed_out: AtomicBool,
    /// Its outcome, once it ended (when `keep`).
    ended: OnceLock<RunOutcome>,
}

/// The handler: decodes the arguments and runs under the job's timeout; a panic or the
/// timeout is the attempt's failure. Records what it did in `state`.
async fn handle(
    descriptor: &JobDescriptor,
    ctx: JobContext,
    args: &RawValue,
    timeout: Option<Duration>,
    state: &HandlerState,
) -> RunOutcome {
    state.started.store(true, Ordering::Relaxed);
    let outcome = run_handler(descriptor, ctx, args, timeout, &state.timed_out).await;
    if state.keep {
        let _ = state.ended.set(outcome.clone());
    }
    outcome
}

/// Decodes the arguments (in the descriptor) and runs the handler under `timeout`.
async fn run_handler(
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
