//! How many jobs a queue buffers beyond its free slots: as many as its slots complete in
//! the prefetch window, up to the queue's cap.
//!
//! A queue of fast jobs then has its next jobs in hand while a claim is on its way, and
//! claims them in batches near the cap rather than one slot's worth at a time. A queue of
//! slow jobs completes few per window and buffers none, so it never sits on work that
//! another node could start, and a higher-priority job never waits behind more than a
//! window's worth of buffered ones.
//!
//! The rate is what the queue's slots can do, `concurrency / mean run time`, with the run
//! time averaged over the last few jobs on this node. It does not fall while the queue is
//! idle, so a burst after a quiet spell is claimed ahead at once; a queue that has run
//! nothing yet buffers nothing. When buffered jobs had to go back because they waited too
//! long (every slot was taken by jobs slower than the mean said), the queue buffers
//! nothing more until one of its jobs finishes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Each new run time weighs this fraction of the mean (a mean over about the last eight).
const WEIGHT: f64 = 1.0 / 8.0;

/// The mean run time of a queue's jobs on this node, shared by its executors (which record
/// each run) and its producer (which sizes the buffer from it).
#[derive(Debug, Default)]
pub(crate) struct RunTime {
    /// Nanoseconds, as `f64` bits; zero until the first run.
    mean_nanos: AtomicU64,
    /// Runs recorded.
    runs: AtomicU64,
}

impl RunTime {
    /// Folds in one job's run time. Two executors recording at once may lose one of the
    /// two samples, which only makes the mean a little less smooth.
    pub(crate) fn record(&self, took: Duration) {
        let sample = took.as_nanos() as f64;
        let old = f64::from_bits(self.mean_nanos.load(Ordering::Relaxed));
        let new = if old > 0.0 { old + (sample - old) * WEIGHT } else { sample.max(1.0) };
        self.mean_nanos.store(new.to_bits(), Ordering::Relaxed);
        self.runs.fetch_add(1, Ordering::Relaxed);
    }

    /// How many runs were recorded.
    pub(crate) fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// The mean, if any job ran.
    pub(crate) fn mean(&self) -> Option<Duration> {
        let nanos = f64::from_bits(self.mean_nanos.load(Ordering::Relaxed));
        (nanos > 0.0).then(|| Duration::from_nanos(nanos as u64))
    }
}

/// One queue's buffer sizing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefetch {
    /// Buffer what the slots complete in this long (zero: no buffer).
    pub(crate) window: Duration,
    /// The most jobs buffered.
    pub(crate) cap: usize,
}

impl Prefetch {
    /// How many jobs to keep buffered, given the mean run time and the queue's slots on
    /// this node (as the cluster's setting may have changed them).
    pub(crate) fn target(&self, mean_run: Option<Duration>, concurrency: usize) -> usize {
        let Some(mean) = mean_run else { return 0 };
        let per_slot = self.window.as_secs_f64() / mean.as_secs_f64().max(1e-9);
        let want = per_slot * concurrency as f64;
        if want.is_finite() && want >= 1.0 { (want as usize).min(self.cap) } else { 0 }
    }
}

/// The buffer is refilled when it holds this many or fewer: half its target.
pub(crate) fn low_water(target: usize) -> usize {
    target / 2
}

/// How many jobs a refill claims on top of the free slots: from the low-water mark back
/// to the target. Steady, so that a driver can keep the claim planned for it.
pub(crate) fn refill(target: usize) -> usize {
    target - low_water(target)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Prefetch, RunTime, low_water, refill};

    fn prefetch() -> Prefetch {
        Prefetch { window: Duration::from_millis(20), cap: 100 }
    }

    #[test]
    fn fast_queues_buffer_up_to_the_cap_and_slow_ones_buffer_nothing() {
        // 24 slots of 1 ms jobs: 480 in a window, capped at 100.
        assert_eq!(prefetch().target(Some(Duration::from_millis(1)), 24), 100);
        assert_eq!((low_water(100), refill(100)), (50, 50));
        // 24 slots of one-second jobs: half a job in a window.
        assert_eq!(prefetch().target(Some(Duration::from_secs(1)), 24), 0);
        // 2 slots of 25 ms jobs: 1.6 jobs.
        assert_eq!(prefetch().target(Some(Duration::from_millis(25)), 2), 1);
        // Nothing ran yet: nothing is known.
        assert_eq!(prefetch().target(None, 24), 0);
        assert_eq!((low_water(1), refill(1)), (0, 1));
    }

    #[test]
    fn a_zero_window_never_buffers() {
        let p = Prefetch { window: Duration::ZERO, cap: 100 };
        assert_eq!(p.target(Some(Duration::from_nanos(1)), 10), 0);
    }

    #[test]
    fn the_mean_follows_the_recent_runs() {
        let runs = RunTime::default();
        assert_eq!(runs.mean(), None);
        runs.record(Duration::from_millis(10));
        assert_eq!(runs.mean(), Some(Duration::from_millis(10)));
        for _ in 0..50 {
            runs.record(Duration::from_millis(1));
        }
        let mean = runs.mean().unwrap_or_default();
        assert!(mean < Duration::from_micros(1_100), "{mean:?}");
        runs.record(Duration::ZERO);
        assert!(runs.mean().is_some(), "a zero run time keeps a mean");
    }
}
