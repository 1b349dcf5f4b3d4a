//! Per-minute outcome counters: added up by each worker and written about once a second,
//! so the dashboard's throughput chart reads 60 small rows instead of counting jobs.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::kind_stats::KindStatsCount;
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

/// `stats_record`: add `counts` to the per-queue counters and `kinds` to the per-kind ones.
#[derive(Debug, Clone, Copy)]
pub struct StatsRecordParams<'a> {
    /// The counts by queue and state.
    pub counts: &'a [StatsCount<'a>],
    /// The counts by kind: outcomes and duration histograms.
    pub kinds: &'a [KindStatsCount<'a>],
}

/// `stats_compact`: rolls the per-minute counters (per queue and per kind) older than
/// `older_than` up into hourly ones, in one transaction, so that reading a week stays small
/// (a week of 10 busy kinds is 1.8 M minute rows, 190 k once all but the last day are
/// hours). Reads of windows in steps of an hour or more are unchanged by it. Returns how
/// many minute rows were rolled up.
#[derive(Debug, Clone, Copy)]
pub struct StatsCompactParams {
    /// Per-queue minute rows (`job_stats`) older than this are rolled up.
    pub older_than: Duration,
    /// Per-kind minute rows (`job_kind_stats`) older than this are rolled up. The kinds
    /// page shows totals over an hour, a day or a week, so only its hour window needs
    /// minutes; with 120 busy kinds, a day of minute rows is 2.8 M rows to sum.
    pub kinds_older_than: Duration,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// A per-queue counter summed into a throughput bucket, as every driver reads `job_stats`:
/// the bucket's index from the first (whole steps), the state, the sum.
#[derive(Debug, Clone, PartialEq, Eq, diesel::QueryableByName)]
pub struct BucketSum {
    /// Whole steps since the first bucket.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub idx: i64,
    /// The outcome's state name.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub state: String,
    /// The sum.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub n: i64,
}

/// `stats_prune`: delete counters (per queue and per kind) older than `keep`. Returns how
/// many rows went.
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
    pub fn fill(&self, first: DateTime<Utc>, rows: impl IntoIterator<Item = BucketSum>) -> Vec<Throughput> {
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
        for BucketSum { idx: index, state, n } in rows {
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
