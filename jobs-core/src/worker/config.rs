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
    /// Delete completed jobs instead of keeping them (no audit trail, least bloat). A
    /// job other jobs depend on (a workflow's step, a batch's member) is kept all the
    /// same, for its dependents to read that it completed; the pruner removes it later.
    pub delete_on_completion: bool,
    /// The most jobs this node claims ahead of its free slots for this queue (its local
    /// buffer; see [`WorkerBuilder::prefetch_window`](super::WorkerBuilder::prefetch_window)
    /// for how many it actually keeps). `None`: [`QueueConfig::DEFAULT_PREFETCH`] or the
    /// concurrency, whichever is larger. `Some(0)`: never claim ahead.
    pub prefetch: Option<usize>,
    /// Cluster-wide limits this worker declares for the queue (with those its job kinds
    /// declare with `limit`): they apply where the queue's stored settings set none. A
    /// queue with any limit claims nothing ahead.
    pub limits: jobs_driver::DeclaredLimits,
}

impl QueueConfig {
    /// The smallest default cap on a queue's buffer: large enough that a queue of fast
    /// jobs with few slots refills it in claims of about 200 and never waits for one (10
    /// or 24 slots then burn down at the raw-SQL ceiling's rate; with a cap of 100 they
    /// reached 0.5–0.7 of it, with 200 about 0.8; docs/benchmarks.md).
    pub const DEFAULT_PREFETCH: usize = 400;

    /// `name` with `concurrency` slots, keeping completed jobs.
    pub fn new(name: impl Into<String>, concurrency: usize) -> QueueConfig {
        QueueConfig {
            name: name.into(),
            concurrency,
            delete_on_completion: false,
            prefetch: None,
            limits: jobs_driver::DeclaredLimits::default(),
        }
    }

    /// Caps the jobs claimed ahead of the free slots at `n` (0: none).
    pub fn prefetch(mut self, n: usize) -> QueueConfig {
        self.prefetch = Some(n);
        self
    }

    /// The cap on this queue's buffer (see [`QueueConfig::prefetch`]).
    pub fn prefetch_cap(&self) -> usize {
        self.prefetch.unwrap_or(self.concurrency.max(Self::DEFAULT_PREFETCH))
    }

    /// At most `limit` of the queue's jobs running at once across the cluster.
    pub fn global_limit(mut self, limit: u32) -> QueueConfig {
        self.limits.global_limit = Some(i64::from(limit));
        self
    }

    /// At most `limit` of the queue's jobs running at once per partition key, across the
    /// cluster (a job's key: its kind's `partition_by`, or `.partition_key(..)` at
    /// enqueue). Keys are served in turn, so one busy key does not hold the others back.
    pub fn per_key_limit(mut self, limit: u32) -> QueueConfig {
        self.limits.per_key_limit = Some(i64::from(limit));
        self
    }

    /// At most `allowed` of the queue's jobs started in any `period`, across the cluster
    /// (counted in twentieths of the period; see `jobs_driver::ClaimLimits`).
    pub fn rate_limit(mut self, allowed: u32, period: Duration) -> QueueConfig {
        let period_secs = u32::try_from(period.as_secs()).unwrap_or(u32::MAX);
        self.limits.rate = Some(jobs_driver::RateLimit { allowed, period_secs });
        self
    }

    /// At most `allowed` of the queue's jobs started in any `period` per partition key,
    /// across the cluster (each key counted apart, the unkeyed jobs as one key; counted
    /// in twentieths of the period, as [`QueueConfig::rate_limit`]).
    pub fn per_key_rate_limit(mut self, allowed: u32, period: Duration) -> QueueConfig {
        let period_secs = u32::try_from(period.as_secs()).unwrap_or(u32::MAX);
        self.limits.per_key_rate = Some(jobs_driver::RateLimit { allowed, period_secs });
        self
    }

    /// Deletes completed jobs instead of keeping them, except those other jobs depend on
    /// (kept until the pruner runs, for their dependents to read that they completed).
    pub fn delete_on_completion(mut self) -> QueueConfig {
        self.delete_on_completion = true;
        self
    }
}
