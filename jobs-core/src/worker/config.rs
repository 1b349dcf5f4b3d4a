//! How a worker is configured: queues with their concurrency, node name, intervals.

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
