//! What a handler's return value means for the job.

use std::time::Duration;

use serde::Serialize;

/// An explicit outcome a handler can return instead of a plain value:
/// `Ok(Outcome::snooze(Duration::from_secs(60)))`.
///
/// A handler returning `Ok(value)` completes the job with `value` stored as its result;
/// `Err(error)` fails the attempt (retry with backoff, or discard when out of attempts).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T = ()> {
    /// Complete with this result.
    Complete(T),
    /// Run again after this delay, without counting this run as an attempt.
    Snooze(Duration),
    /// Stop for good, as cancelled, with a reason.
    Cancel(String),
    /// Stop for good, as discarded, with a reason.
    Discard(String),
}

impl<T> Outcome<T> {
    /// Runs the job again after `delay`; the attempt is given back.
    pub fn snooze(delay: Duration) -> Self {
        Outcome::Snooze(delay)
    }

    /// Ends the job as cancelled.
    pub fn cancel(reason: impl Into<String>) -> Self {
        Outcome::Cancel(reason.into())
    }

    /// Ends the job as discarded.
    pub fn discard(reason: impl Into<String>) -> Self {
        Outcome::Discard(reason.into())
    }
}

/// An attempt's failure, as recorded in the job's `errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The error's text (`{:#}`, so `anyhow` chains are included).
    pub message: String,
    /// The Rust type of the error, or `panic`, `timeout`, `invalid_args`, ...
    pub error_type: String,
    /// The backtrace, for panics.
    pub backtrace: Option<String>,
}

/// What the worker does with a job after one run. Produced from the handler's return value.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// Success, with the result's JSON (`None` for `()`/null).
    Completed(Option<String>),
    /// The attempt failed.
    Failed(Failure),
    /// Run again later without using up an attempt.
    Snoozed(Duration),
    /// Ended as cancelled.
    Cancelled(String),
    /// Ended as discarded.
    Discarded(Failure),
}

fn encode_result<T: Serialize>(value: &T) -> RunOutcome {
    match serde_json::to_string(value) {
        Ok(text) if text == "null" => RunOutcome::Completed(None),
        Ok(text) => RunOutcome::Completed(Some(text)),
        Err(e) => RunOutcome::Failed(Failure {
            message: format!("the job's result could not be encoded as JSON: {e}"),
            error_type: "result_encoding".into(),
            backtrace: None,
        }),
    }
}

/// Turns a handler's `Ok` value into a [`RunOutcome`]: any `Serialize` value completes
/// the job, an [`Outcome`] says explicitly what happens.
pub trait IntoOutcome {
    /// The type of the result stored on success (a dependent reads it back as this:
    /// `JobContext::dependency_result`).
    type Value;

    /// The outcome.
    fn into_outcome(self) -> RunOutcome;
}

impl<T: Serialize> IntoOutcome for T {
    type Value = T;

    fn into_outcome(self) -> RunOutcome {
        encode_result(&self)
    }
}

impl<T: Serialize> IntoOutcome for Outcome<T> {
    type Value = T;

    fn into_outcome(self) -> RunOutcome {
        match self {
            Outcome::Complete(value) => encode_result(&value),
            Outcome::Snooze(delay) => RunOutcome::Snoozed(delay),
            Outcome::Cancel(reason) => RunOutcome::Cancelled(reason),
            Outcome::Discard(reason) => RunOutcome::Discarded(Failure {
                message: reason,
                error_type: "discarded_by_handler".into(),
                backtrace: None,
            }),
        }
    }
}

/// Splits a handler's declared return type `Result<T, E>` into `T` and `E`, so that
/// `#[job]` works with aliases such as `anyhow::Result<T>`.
pub trait HandlerReturn {
    /// `T`.
    type Output;
    /// `E`.
    type Error;
}

impl<T, E> HandlerReturn for Result<T, E> {
    type Output = T;
    type Error = E;
}
