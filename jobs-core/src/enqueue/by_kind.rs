//! Enqueueing a job by its kind's name with JSON arguments: what the dashboard's form and
//! `jobs-dashboard enqueue` do, as they do not link the application's job types. The
//! kind's options (`#[job(...)]`: queue, attempts, timeout, priority, tags, uniqueness)
//! apply as they do to a typed [`EnqueueRequest`](crate::EnqueueRequest): read from the
//! process's registry, or as the kind's live nodes publish them
//! ([`JobOptions::from_published`]).

use std::borrow::Cow;

use jobs_driver::NewJob;

use super::overrides::{Overrides, override_setters};
use crate::error::Result;
use crate::options::JobOptions;

/// A job of a kind named at run time, its arguments as JSON, with per-call overrides of
/// the kind's options.
///
/// ```
/// # use jobs_core::{JobOptions, KindRequest};
/// # use std::time::Duration;
/// // The kind's options, as its registry entry or its live nodes give them.
/// let declared = JobOptions::new().queue("mailers").max_attempts(5).timeout(Duration::from_secs(30));
/// let row = KindRequest::new("mail.welcome", serde_json::json!({"user_id": 7}))
///     .priority(1)
///     .to_new_job(declared)?;
/// assert_eq!((row.queue.as_ref(), row.max_attempts, row.timeout_ms, row.priority), ("mailers", 5, Some(30_000), 1));
/// # Ok::<(), jobs_core::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until its row is enqueued"]
pub struct KindRequest {
    kind: String,
    args: serde_json::Value,
    overrides: Overrides,
}

impl KindRequest {
    /// A request for a job of `kind` with `args`, its kind's options unchanged.
    pub fn new(kind: impl Into<String>, args: serde_json::Value) -> Self {
        KindRequest { kind: kind.into(), args, overrides: Overrides::default() }
    }

    override_setters!();

    /// The row this request inserts with `options` (the kind's) where the request says
    /// nothing, encoded and checked as a typed request's ([`NewJob::validate`]): the same
    /// uniqueness key, tags added to the kind's.
    pub fn to_new_job(&self, options: JobOptions) -> Result<NewJob> {
        self.overrides.new_job(Cow::Owned(self.kind.clone()), options, &self.args)
    }
}
