//! How a worker is configured: queues with their concurrency, node name, intervals.

use std::time::Duration;

/// What a worker does with a claimed job whose kind it does not know (a row enqueued by a
/// newer deploy, or by a job that was removed). Either way the row stays in the table; the
/// dashboard says which live nodes know the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownKindPolicy {
    /// Hand it back for a node that knows the kind: available again after `retry_in`,
    /// without using up an attempt or adding an error entry (a rolling deploy's new nodes
    /// take it). Once the job is `give_up_after` old, its attempt fails like any error
    /// (then [`Fail`](Self::Fail)'s course). The default: 5 s, 1 hour.
    HandBack {
        /// How long before another node may claim it.
        retry_in: Duration,
        /// How old the job may be before it stops waiting for a node that knows it.
        give_up_after: Duration,
    },
    /// Fail the attempt like any error: retried on the backoff policy, then discarded
    /// (and retryable from the dashboard), with an error entry naming the node.
    Fail,
    /// Leave it for a node that knows the kind: schedule it again after this delay
    /// without using up an attempt, with an error entry each time, for as long as it takes.
    Postpone(Duration),
}

impl Default for UnknownKindPolicy {
    fn default() -> Self {
        UnknownKindPolicy::HandBack {
            retry_in: Duration::from_secs(5),
            give_up_after: Duration::from_secs(3600),
        }
    }
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
