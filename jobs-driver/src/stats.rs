//! Per-minute outcome counters: added up by each worker and written about once a second,
//! so the dashboard's throughput chart reads 60 small rows instead of counting jobs.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::state::JobState;

/// Outcomes in one bucket (a minute, by default) of a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// The bucket's start.
    pub minute: DateTime<Utc>,
    /// Jobs completed in it.
    pub completed: i64,
    /// Failed attempts that will be retried.
    pub retried: i64,
    /// Jobs discarded in it.
    pub discarded: i64,
    /// Jobs cancelled in it.
    pub cancelled: i64,
}

/// How many outcomes of one state one queue had in one minute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatsCount<'a> {
    /// The minute (truncated by the driver).
    pub minute: DateTime<Utc>,
    /// The queue.
    pub queue: &'a str,
    /// The outcome.
    pub state: JobState,
    /// How many.
    pub count: i64,
}

/// `stats_record`: add `counts` to the counters.
#[derive(Debug, Clone, Copy)]
pub struct StatsRecordParams<'a> {
    /// The counts.
    pub counts: &'a [StatsCount<'a>],
}

/// `stats_prune`: delete counters older than `keep`. Returns how many rows went.
#[derive(Debug, Clone, Copy)]
pub struct StatsPruneParams {
    /// How long to keep them.
    pub keep: Duration,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `stats_throughput`: outcomes over the last `window`, in buckets of `step`, oldest
/// first: [`buckets`](Self::buckets) entries, the last one holding the current (partial)
/// step. Buckets start at multiples of `step` since the Unix epoch. The default is the
/// last hour by minute; the counters are kept as long as the pruner's `stats` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsThroughputParams {
    /// How far back.
    pub window: Duration,
    /// Each bucket's length: whole minutes, at least one.
    pub step: Duration,
    /// Now (this process's clock when `None`).
    pub now: Option<DateTime<Utc>>,
}

impl Default for StatsThroughputParams {
    fn default() -> Self {
        StatsThroughputParams { window: Duration::from_secs(3600), step: Duration::from_secs(60), now: None }
    }
}

/// The most buckets one read returns.
pub const MAX_THROUGHPUT_BUCKETS: i64 = 2_000;

impl StatsThroughputParams {
    /// The step in whole minutes (at least one).
    pub fn step_minutes(&self) -> i64 {
        i64::try_from(self.step.as_secs() / 60).unwrap_or(i64::MAX).max(1)
    }

    /// How many buckets: the window over the step, between 1 and [`MAX_THROUGHPUT_BUCKETS`].
    pub fn buckets(&self) -> i64 {
        let window = i64::try_from(self.window.as_secs() / 60).unwrap_or(i64::MAX);
        (window / self.step_minutes()).clamp(1, MAX_THROUGHPUT_BUCKETS)
    }

    /// The start of the first bucket, given now.
    pub fn first_bucket(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let step_secs = self.step_minutes() * 60;
        let last = now.timestamp().div_euclid(step_secs) * step_secs;
        let first = last - (self.buckets() - 1) * step_secs;
        DateTime::from_timestamp(first, 0).unwrap_or(now)
    }

    /// The buckets, filled from `(bucket index, state, count)` rows (the drivers compute
    /// the index in SQL: whole steps since [`first_bucket`](Self::first_bucket)); rows outside the
    /// buckets or of other states are ignored.
    pub fn fill(
        &self,
        first: DateTime<Utc>,
        rows: impl IntoIterator<Item = (i64, String, i64)>,
    ) -> Vec<Throughput> {
        let step = chrono::TimeDelta::minutes(self.step_minutes());
        let mut buckets: Vec<Throughput> = (0..self.buckets())
            .map(|i| Throughput {
                minute: first + step * i32::try_from(i).unwrap_or(0),
                completed: 0,
                retried: 0,
                discarded: 0,
                cancelled: 0,
            })
            .collect();
        for (index, state, n) in rows {
            let Some(bucket) = usize::try_from(index).ok().and_then(|i| buckets.get_mut(i)) else { continue };
            match state.as_str() {
                "completed" => bucket.completed += n,
                "retryable" => bucket.retried += n,
                "discarded" => bucket.discarded += n,
                "cancelled" => bucket.cancelled += n,
                _ => {}
            }
        }
        buckets
    }
}
