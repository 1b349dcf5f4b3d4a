//! Queues: their pause flag shared by every node, and their pending work.

/// One queue's pending work, for the overview and queues pages.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueDepth {
    /// Queue name.
    pub queue: String,
    /// Available jobs.
    pub available: i64,
    /// Scheduled jobs.
    pub scheduled: i64,
    /// Running jobs.
    pub running: i64,
    /// Retryable jobs.
    pub retryable: i64,
    /// Seconds the oldest available job has waited (its latency).
    pub oldest_available_secs: Option<f64>,
    /// Whether the queue is paused.
    pub paused: bool,
}

/// `queue_set_paused`: pause (`true`) or resume (`false`) `queue` on every node. The flag
/// is stored; nodes are told by notification where the driver has them, and read it at
/// their next poll otherwise.
#[derive(Debug, Clone, Copy)]
pub struct QueueSetPausedParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Paused or not.
    pub paused: bool,
}

/// `queue_is_paused`: whether `queue` is paused.
#[derive(Debug, Clone, Copy)]
pub struct QueueIsPausedParams<'a> {
    /// The queue.
    pub queue: &'a str,
}

/// `queue_list_paused`: the names of every paused queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueListPausedParams {}

/// `queue_list_depths`: every queue with pending jobs, a stored setting, or a node
/// running it, by name.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueListDepthsParams {}
