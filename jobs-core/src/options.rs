//! Per-kind job defaults, set by `#[job(...)]` or [`Job::options`](crate::Job::options).

use std::borrow::Cow;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::unique::UniqueOptions;

/// The queue jobs go to when nothing else is said.
pub const DEFAULT_QUEUE: &str = "default";

pub use jobs_driver::DEFAULT_MAX_ATTEMPTS;

/// The defaults a job kind's rows are inserted with; every one can be overridden per call
/// on [`EnqueueRequest`](crate::EnqueueRequest).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobOptions {
    /// The queue (default `"default"`).
    pub queue: Cow<'static, str>,
    /// Lower runs first (default 0).
    pub priority: i16,
    /// Attempts before the job is discarded (default 20).
    pub max_attempts: i32,
    /// Time limit per attempt (default none).
    pub timeout: Option<Duration>,
    /// Delay between attempts (default attempt⁴ + 15 s).
    pub backoff: Backoff,
    /// De-duplication (default none).
    pub unique: Option<UniqueOptions>,
    /// Tags added to every job of the kind.
    pub tags: Vec<Cow<'static, str>>,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions::new()
    }
}

impl JobOptions {
    /// The defaults: queue `default`, priority 0, 20 attempts, no timeout, polynomial backoff.
    pub const fn new() -> Self {
        JobOptions {
            queue: Cow::Borrowed(DEFAULT_QUEUE),
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            timeout: None,
            backoff: Backoff::Polynomial,
            unique: None,
            tags: Vec::new(),
        }
    }

    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<Cow<'static, str>>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the number of attempts.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the time limit per attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the backoff policy.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Makes the kind unique.
    pub fn unique(mut self, unique: UniqueOptions) -> Self {
        self.unique = Some(unique);
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<Cow<'static, str>>) -> Self {
        self.tags.push(tag.into());
        self
    }
}
