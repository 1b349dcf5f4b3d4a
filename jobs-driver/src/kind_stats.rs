//! Per-kind counters (`job_kind_stats`): what they count (outcomes, and log2 histograms of
//! run and wait times), the parameters of `stats_kinds`, and the sums every driver reads
//! back folded into one [`KindStats`] per kind.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How many buckets a duration histogram has: bucket 0 holds at most 1 ms, bucket `i` more
/// than 2^(i-1) ms and at most 2^i ms, and the last everything longer (2^30 ms is 12 days).
pub const DURATION_BUCKETS: usize = 32;

/// The histogram bucket of a duration in milliseconds.
///
/// ```
/// use jobs_driver::duration_bucket;
/// assert_eq!([0, 1, 2, 3, 4, 5, 1000, u64::MAX].map(duration_bucket), [0, 0, 1, 2, 2, 3, 10, 31]);
/// ```
pub fn duration_bucket(ms: u64) -> usize {
    if ms <= 1 {
        return 0;
    }
    // The smallest i with 2^i >= ms.
    let i = (64 - (ms - 1).leading_zeros()) as usize;
    i.min(DURATION_BUCKETS - 1)
}

/// What a per-kind counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KindMetric {
    /// Jobs completed.
    Completed,
    /// Failed attempts that will be retried.
    Retried,
    /// Jobs discarded.
    Discarded,
    /// Jobs cancelled.
    Cancelled,
    /// Attempts by how long their handler ran (a histogram).
    RunMs,
    /// Attempts by how long they waited between being due and being claimed (a histogram).
    WaitMs,
}

impl KindMetric {
    /// Every metric.
    pub const ALL: [KindMetric; 6] = [
        KindMetric::Completed,
        KindMetric::Retried,
        KindMetric::Discarded,
        KindMetric::Cancelled,
        KindMetric::RunMs,
        KindMetric::WaitMs,
    ];

    /// Its name in `job_kind_stats.metric`.
    pub const fn as_str(self) -> &'static str {
        match self {
            KindMetric::Completed => "completed",
            KindMetric::Retried => "retried",
            KindMetric::Discarded => "discarded",
            KindMetric::Cancelled => "cancelled",
            KindMetric::RunMs => "run_ms",
            KindMetric::WaitMs => "wait_ms",
        }
    }

    /// The metric named `name`.
    pub fn parse(name: &str) -> Option<KindMetric> {
        KindMetric::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// One per-kind counter in one minute: an outcome (`idx` 0) or a histogram bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KindStatsCount<'a> {
    /// The minute (truncated by the driver).
    pub minute: DateTime<Utc>,
    /// The job kind.
    pub kind: &'a str,
    /// What is counted.
    pub metric: KindMetric,
    /// The histogram bucket (see [`duration_bucket`]); 0 for an outcome.
    pub idx: i16,
    /// How many.
    pub count: i64,
}

/// `stats_kinds`: each kind's outcomes and durations over the last `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsKindsParams {
    /// How far back (whole minutes).
    pub window: Duration,
    /// Now (this process's clock when `None`).
    pub now: Option<DateTime<Utc>>,
}

impl StatsKindsParams {
    /// The first minute the window holds. A window longer than an hour starts on the hour
    /// before: per-kind counters older than two hours are kept by the hour (the pruner's
    /// `kind_stats_hourly_after`), and a start within an hour would leave out the part of
    /// that hour's row after it. So a day is 24 to 25 hours of counts, never fewer.
    pub fn since(&self) -> DateTime<Utc> {
        let now = self.now.unwrap_or_else(Utc::now);
        let window = chrono::TimeDelta::from_std(self.window).unwrap_or(chrono::TimeDelta::MAX);
        let since = now.checked_sub_signed(window).unwrap_or(now);
        if self.window <= Duration::from_secs(3600) {
            return since;
        }
        chrono::DurationRound::duration_trunc(since, chrono::TimeDelta::hours(1)).unwrap_or(since)
    }
}

/// A duration histogram (see [`duration_bucket`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram(pub [i64; DURATION_BUCKETS]);

impl Histogram {
    /// How many durations it holds.
    pub fn count(&self) -> i64 {
        self.0.iter().sum()
    }

    /// The `p` quantile (0 to 1), interpolated within its bucket on a log scale; `None`
    /// when empty.
    pub fn quantile(&self, p: f64) -> Option<Duration> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (p.clamp(0.0, 1.0) * total as f64).max(1.0);
        let mut seen = 0.0;
        for (i, n) in self.0.iter().enumerate() {
            let n = *n as f64;
            if n > 0.0 && seen + n >= rank {
                if i == 0 {
                    return Some(Duration::from_millis(1));
                }
                let (low, high) = ((i - 1) as f64, i as f64);
                let exponent = low + (high - low) * ((rank - seen) / n);
                return Some(Duration::from_secs_f64(2f64.powf(exponent) / 1000.0));
            }
            seen += n;
        }
        None
    }
}

/// A per-kind counter summed over a window, as every driver reads `job_kind_stats`:
/// `SELECT kind, metric, idx, sum(count) AS n … GROUP BY kind, metric, idx`.
#[derive(Debug, Clone, PartialEq, Eq, diesel::QueryableByName)]
pub struct KindStatsSum {
    /// The job kind.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub kind: String,
    /// A [`KindMetric`]'s name.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub metric: String,
    /// The histogram bucket (0 for an outcome).
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub idx: i64,
    /// The sum.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub n: i64,
}

/// One kind's outcomes and durations over a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindStats {
    /// The job kind.
    pub kind: String,
    /// Jobs completed.
    pub completed: i64,
    /// Failed attempts that will be retried.
    pub retried: i64,
    /// Jobs discarded.
    pub discarded: i64,
    /// Jobs cancelled.
    pub cancelled: i64,
    /// How long attempts ran.
    pub run: Histogram,
    /// How long jobs waited to be claimed once due.
    pub wait: Histogram,
}

impl KindStats {
    /// Each kind's stats from `(kind, metric, idx, count)` rows summed over a window (what
    /// every driver reads), by kind name. Unknown metrics and buckets are ignored.
    pub fn fold(rows: impl IntoIterator<Item = KindStatsSum>) -> Vec<KindStats> {
        let mut kinds: std::collections::BTreeMap<String, KindStats> = std::collections::BTreeMap::new();
        for KindStatsSum { kind, metric, idx, n: count } in rows {
            let Some(metric) = KindMetric::parse(&metric) else { continue };
            let stats =
                kinds.entry(kind.clone()).or_insert_with(|| KindStats { kind, ..KindStats::default() });
            let bucket = usize::try_from(idx).ok().filter(|i| *i < DURATION_BUCKETS);
            match (metric, bucket) {
                (KindMetric::Completed, _) => stats.completed += count,
                (KindMetric::Retried, _) => stats.retried += count,
                (KindMetric::Discarded, _) => stats.discarded += count,
                (KindMetric::Cancelled, _) => stats.cancelled += count,
                (KindMetric::RunMs, Some(i)) => stats.run.0[i] += count,
                (KindMetric::WaitMs, Some(i)) => stats.wait.0[i] += count,
                _ => {}
            }
        }
        kinds.into_values().collect()
    }

    /// Failed attempts (retried, discarded) over every attempt that ended.
    pub fn failure_rate(&self) -> Option<f64> {
        let failed = self.retried + self.discarded;
        let ended = failed + self.completed + self.cancelled;
        (ended > 0).then(|| failed as f64 / ended as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_fall_in_their_bucket() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        h.0[duration_bucket(3)] += 90; // 3 ms: bucket 2, (2, 4] ms
        h.0[duration_bucket(900)] += 10; // 900 ms: bucket 10, (512, 1024] ms
        let p50 = h.quantile(0.5).expect("p50");
        assert!(p50 > Duration::from_millis(2) && p50 <= Duration::from_millis(4), "{p50:?}");
        let p95 = h.quantile(0.95).expect("p95");
        assert!(p95 > Duration::from_millis(512) && p95 <= Duration::from_millis(1024), "{p95:?}");
        assert_eq!(h.quantile(1.0), Some(Duration::from_millis(1024)));
    }

    #[test]
    fn rows_fold_into_kinds() {
        let row = |kind: &str, metric: &str, idx, n| KindStatsSum {
            kind: kind.into(),
            metric: metric.into(),
            idx,
            n,
        };
        let rows = [
            row("a", "completed", 0, 3),
            row("a", "run_ms", 5, 3),
            row("a", "run_ms", 99, 1),
            row("a", "nonsense", 0, 1),
            row("b", "discarded", 0, 1),
        ];
        let kinds = KindStats::fold(rows);
        assert_eq!(kinds.len(), 2);
        assert_eq!(
            (kinds[0].completed, kinds[0].run.count()),
            (3, 3),
            "an unknown bucket or metric is ignored"
        );
        assert_eq!(kinds[1].failure_rate(), Some(1.0));
    }
}
