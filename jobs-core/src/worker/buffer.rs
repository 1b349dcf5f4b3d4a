//! A queue's local buffer: jobs this node has claimed beyond its free slots, waiting for a
//! slot, highest priority first.
//!
//! A buffered job is claimed in the database like a running one (state `running`, this
//! node in `attempted_by`, its attempt counted), so the dashboard shows it as this node's,
//! the rescuer hands it back if the node dies, and the orphan check leaves it alone (it is
//! in [`Shared::held`](super::shared::Shared)). It is not running yet: its timeout starts
//! when an executor takes it. It goes back to the table, its attempt given back and its
//! place in line kept, when the node shuts down, when its queue is paused, and when it has
//! waited [`prefetch_max_wait`](super::WorkerBuilder::prefetch_max_wait) (so a node whose
//! slots are all taken by long jobs does not sit on work another node could run).
//!
//! The executors take from it as their slots free, without waiting for the producer; the
//! producer refills it when it falls to half its target (see `prefetch`).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use jobs_driver::{ClaimedJob, Completion, JobState};

use super::running_jobs::RunningJob;

/// A claimed job waiting for a slot, with its handle (a cancellation request reaches it
/// there) and the moment it was buffered.
#[derive(Debug)]
pub(crate) struct Buffered {
    pub(crate) job: ClaimedJob,
    pub(crate) running: RunningJob,
    pub(crate) since: Instant,
}

impl Buffered {
    /// The order jobs are claimed in: priority, then due time, then id.
    fn key(&self) -> (i16, DateTime<Utc>, i64) {
        (self.job.priority, self.job.scheduled_at, self.job.id)
    }

    /// The outcome that gives it back to the queue: available again at once, in its place
    /// (its `scheduled_at` is kept), its attempt given back, no error entry (it never ran).
    /// A cancellation requested meanwhile turns it cancelled (the completion's rule).
    pub(crate) fn hand_back(&self) -> Completion {
        Completion {
            id: self.job.id,
            queue: self.job.queue.as_str().into(),
            workflow_id: self.job.workflow_id,
            attempt: self.job.attempt,
            state: JobState::Available,
            result: None,
            error: None,
            delay_ms: None,
            give_back_attempt: true,
            extra_attempt: false,
            delete: false,
            timing: None,
        }
    }
}

// The heap is a max-heap: the job that sorts first (lowest priority number, earliest due,
// lowest id) must compare greatest.
impl Ord for Buffered {
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

impl PartialOrd for Buffered {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Buffered {
    fn eq(&self, other: &Self) -> bool {
        self.job.id == other.job.id
    }
}

impl Eq for Buffered {}

/// The jobs waiting for a slot, in claim order.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    heap: BinaryHeap<Buffered>,
    /// Set at shutdown: executors take nothing more, and what is left goes back.
    closed: bool,
}

impl Buffer {
    /// How many jobs wait.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Adds a claimed job.
    pub(crate) fn push(&mut self, job: Buffered) {
        self.heap.push(job);
    }

    /// The job to start next, unless the buffer is closed.
    pub(crate) fn pop(&mut self) -> Option<Buffered> {
        if self.closed { None } else { self.heap.pop() }
    }

    /// Removes and returns the jobs buffered at or before `cutoff`.
    pub(crate) fn take_since(&mut self, cutoff: Instant) -> Vec<Buffered> {
        if !self.heap.iter().any(|b| b.since <= cutoff) {
            return Vec::new();
        }
        let (stale, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.heap).into_iter().partition(|b| b.since <= cutoff);
        self.heap = kept.into();
        stale
    }

    /// Removes and returns every job.
    pub(crate) fn take_all(&mut self) -> Vec<Buffered> {
        std::mem::take(&mut self.heap).into_vec()
    }

    /// When the longest-waiting job was buffered.
    pub(crate) fn oldest(&self) -> Option<Instant> {
        self.heap.iter().map(|b| b.since).min()
    }

    /// Whether the buffer was closed (shutdown).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Closes the buffer for good (shutdown) and returns what it held.
    pub(crate) fn close(&mut self) -> Vec<Buffered> {
        self.closed = true;
        self.take_all()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use chrono::{TimeZone, Utc};
    use jobs_driver::{ClaimedJob, JobState};

    use super::{Buffer, Buffered};
    use crate::worker::running_jobs::RunningJob;

    fn job(id: i64, priority: i16, due_s: i64, since: Instant) -> Buffered {
        let at = Utc.timestamp_opt(1_700_000_000 + due_s, 0).single().unwrap_or_default();
        Buffered {
            job: ClaimedJob {
                id,
                kind: "k".into(),
                queue: "q".into(),
                args: "null".into(),
                meta: "{}".into(),
                tags: vec![],
                priority,
                attempt: 1,
                max_attempts: 3,
                timeout_ms: None,
                created_at: at,
                scheduled_at: at,
                attempted_at: at,
                workflow_id: None,
            },
            running: RunningJob::new(),
            since,
        }
    }

    #[test]
    fn jobs_leave_in_claim_order_whatever_order_they_arrived_in() {
        let now = Instant::now();
        let mut buffer = Buffer::default();
        for b in
            [job(5, 2, 0, now), job(4, 1, 9, now), job(3, 1, 1, now), job(2, 1, 1, now), job(1, 3, 0, now)]
        {
            buffer.push(b);
        }
        let order: Vec<i64> = std::iter::from_fn(|| buffer.pop()).map(|b| b.job.id).collect();
        assert_eq!(order, vec![2, 3, 4, 5, 1]);
    }

    #[test]
    fn stale_jobs_leave_and_the_rest_stay_in_order() {
        let old = Instant::now();
        let new = old + Duration::from_millis(10);
        let mut buffer = Buffer::default();
        for b in [job(1, 1, 0, old), job(2, 0, 0, new), job(3, 2, 0, old), job(4, 1, 5, new)] {
            buffer.push(b);
        }
        assert_eq!(buffer.oldest(), Some(old));
        let stale: Vec<i64> = buffer.take_since(old).iter().map(|b| b.job.id).collect();
        assert_eq!(stale.len(), 2);
        assert!(stale.contains(&1) && stale.contains(&3));
        assert_eq!(buffer.len(), 2);
        assert_eq!(buffer.pop().map(|b| b.job.id), Some(2));
        assert_eq!(buffer.pop().map(|b| b.job.id), Some(4));
    }

    #[test]
    fn a_closed_buffer_gives_nothing_and_hands_everything_back() {
        let now = Instant::now();
        let mut buffer = Buffer::default();
        buffer.push(job(1, 1, 0, now));
        let left = buffer.close();
        assert_eq!(left.len(), 1);
        let back = left[0].hand_back();
        assert_eq!((back.state, back.give_back_attempt, back.delay_ms), (JobState::Available, true, None));
        assert!(back.error.is_none());
        buffer.push(job(2, 1, 0, now));
        assert!(buffer.pop().is_none(), "nothing leaves a closed buffer for an executor");
    }
}
