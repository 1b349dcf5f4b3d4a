//! Defining jobs: the [`Job`] trait that `#[job]` implements for you, or that you
//! implement by hand.

use std::fmt::Display;
use std::future::Future;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::job_context::JobContext;
use crate::options::JobOptions;
use crate::outcome::IntoOutcome;

/// A kind of job: its name, argument type, defaults and handler.
///
/// Most jobs come from `#[job]` on an `async fn`. Implement the trait yourself when you
/// prefer a type per job, then register it with [`register_job!`](crate::register_job):
///
/// ```
/// use jobs_core::{Job, JobContext, JobOptions};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct SendInvoice {
///     invoice_id: i64,
/// }
///
/// impl Job for SendInvoice {
///     const KIND: &'static str = "billing::send_invoice";
///     type Args = Self;
///     type Output = ();
///     type Error = std::io::Error;
///
///     fn options() -> JobOptions {
///         JobOptions::new().queue("billing").max_attempts(5)
///     }
///
///     async fn run(_ctx: JobContext, args: Self) -> Result<(), std::io::Error> {
///         println!("sending invoice {}", args.invoice_id);
///         Ok(())
///     }
/// }
///
/// jobs_core::register_job!(SendInvoice);
/// ```
pub trait Job: Send + Sync + 'static {
    /// The name stored in each row's `kind` column. Keep it stable: rows already queued
    /// find their handler by it.
    const KIND: &'static str;

    /// The arguments, stored as JSON.
    type Args: Serialize + DeserializeOwned + Send + 'static;

    /// What a successful run returns: any `Serialize` value (stored as the job's result),
    /// or an [`Outcome`](crate::Outcome) to snooze, cancel or discard.
    type Output: IntoOutcome + Send + 'static;

    /// The handler's error; its text is recorded with the failed attempt.
    type Error: Display + Send + 'static;

    /// Defaults for jobs of this kind.
    fn options() -> JobOptions {
        JobOptions::new()
    }

    /// The application's values the job needs ([`Data`](crate::data::Data) parameters of a
    /// `#[job]` function): a worker that serves the job's queue and lacks one refuses to
    /// start, and a run on a worker without it fails (`missing_data`) before the handler
    /// is called.
    fn needs() -> Vec<crate::data::Need> {
        Vec::new()
    }

    /// Runs one attempt.
    fn run(
        ctx: JobContext,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// Registers a hand-written [`Job`] implementation with the worker registry, as `#[job]`
/// does for functions.
#[macro_export]
macro_rules! register_job {
    ($job:ty) => {
        $crate::__private::inventory::submit! {
            $crate::JobDescriptor::of::<$job>()
        }
    };
}
