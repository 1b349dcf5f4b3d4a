//! Reporting failed attempts to an error tracker: a run middleware that hands each failed
//! or discarded attempt, with its job, to a [`FailureSink`] (Sentry, Honeybadger, a log).
//! The shop reports to its output ([`PrintReports`]); an app would write a sink that calls
//! its tracker's client.

use jobs_core::RunOutcome;
use jobs_core::middleware::{JobRun, Next, RunMiddleware};

/// A failed attempt, with what an error tracker groups and shows it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureReport {
    /// The job.
    pub job_id: i64,
    /// Its kind (a tracker's grouping key, with `error_type`).
    pub kind: &'static str,
    /// Its queue.
    pub queue: String,
    /// The attempt that failed, and how many the job has.
    pub attempt: i32,
    /// How many attempts the job has.
    pub max_attempts: i32,
    /// The error's Rust type, or `panic`, `timeout`, ...
    pub error_type: String,
    /// The error's text.
    pub message: String,
    /// Whether the job gives up here (discarded, or this was its last attempt).
    pub final_attempt: bool,
}

/// Where failed attempts go.
pub trait FailureSink: Send + Sync + 'static {
    /// Takes one report. Called on the job's task after its attempt: keep it quick (queue
    /// the report and send it from another task, as tracker clients do).
    fn report(&self, report: FailureReport);
}

/// Hands every failed or discarded attempt to its sink; the outcome is unchanged.
pub struct ReportFailures<S>(pub S);

#[jobs_core::async_trait]
impl<S: FailureSink> RunMiddleware for ReportFailures<S> {
    async fn run(&self, job: &JobRun<'_>, next: Next<'_>) -> RunOutcome {
        let outcome = next.run().await;
        let (failure, discarded) = match &outcome {
            RunOutcome::Failed(failure) => (failure, false),
            RunOutcome::Discarded(failure) => (failure, true),
            _ => return outcome,
        };
        let ctx = job.context;
        self.0.report(FailureReport {
            job_id: ctx.id(),
            kind: ctx.kind(),
            queue: ctx.queue().to_owned(),
            attempt: ctx.attempt(),
            max_attempts: ctx.max_attempts(),
            error_type: failure.error_type.clone(),
            message: failure.message.clone(),
            final_attempt: discarded || ctx.attempt() >= ctx.max_attempts(),
        });
        outcome
    }
}

/// Prints each report as one line on the standard output.
pub struct PrintReports;

impl FailureSink for PrintReports {
    fn report(&self, r: FailureReport) {
        let then = if r.final_attempt { "given up" } else { "will retry" };
        println!(
            "failure reported: {} attempt {} of {} (job {}, queue {}): {}: {} ({then})",
            r.kind, r.attempt, r.max_attempts, r.job_id, r.queue, r.error_type, r.message
        );
    }
}
