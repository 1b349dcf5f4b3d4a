//! What a driver's [`Listener`](crate::Listener) delivers.

/// A message pushed to every node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notification {
    /// Jobs may have become available on `queue` (an insert, the scheduler, a retry).
    JobsAvailable {
        /// The queue.
        queue: String,
    },
    /// Someone asked for running job `id` to stop.
    CancelJob {
        /// The job.
        id: i64,
    },
    /// `queue` was paused or resumed.
    QueuePaused {
        /// The queue.
        queue: String,
        /// Its new flag.
        paused: bool,
    },
}
