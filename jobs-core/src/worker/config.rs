//! How a worker is configured: queues with their concurrency, node name, intervals.

use std::time::Duration;

/// What a worker does with a claimed job whose kind it does not know (a row enqueued by a
/// newer deploy, or by a job that was removed). Either way the row stays in the table,
/// with an error entry saying which node did not know the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnknownKindPolicy {
    /// Fail the attempt like any error: retried on the backoff policy, then discarded
    /// (and retryable from the dashboard). The default.
    #[default]
    Fail,
    /// Leave it for a node that knows the kind: schedule it again after this delay
    /// without using up an attempt (a rolling deploy's new nodes will take it).
    Postpone(Duration),
}

/// One queue a worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueConfig {
    /// The queue's name.
    pub name: String,
    /// How many of its jobs run at once on this node.
    pub concurrency: usize,
    /// Delete completed jobs instead of keeping them (no audit trail, least bloat).
    pub delete_on_completion: bool,
}

impl QueueConfig {
    /// `name` with `concurrency` slots, keeping completed jobs.
    pub fn new(name: impl Into<String>, concurrency: usize) -> QueueConfig {
        QueueConfig { name: name.into(), concurrency, delete_on_completion: false }
    }

    /// Deletes completed jobs instead of keeping them.
    pub fn delete_on_completion(mut self) -> QueueConfig {
        self.delete_on_completion = true;
        self
    }
}
