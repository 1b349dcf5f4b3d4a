//! A queue's cluster-wide limits, which every node's claims obey together: a global limit
//! (at most this many of its jobs running across the cluster) and a rate limit (at most
//! this many started per period). Stored in `job_queues` (the limits in `settings`, the
//! rate's usage in `rate_window`, `rate_used` and `rate_used_before`); a claim on a
//! limited queue runs in a transaction holding the queue's row, so that claims from every
//! node are counted one after another (see [`JobClaimParams::limited`]).
//!
//! The rate is a sliding window, approximated from two fixed ones: the jobs started in
//! the current window, plus those of the previous window weighted by how much of it the
//! sliding window still covers. A burst at a window's edge therefore cannot start twice
//! the rate.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use jobs_driver::{ClaimLimits, RateLimit};
//!
//! let limits = ClaimLimits {
//!     global_limit: None,
//!     rate: Some(RateLimit { allowed: 10, period_secs: 60 }),
//!     window: None,
//! };
//! let now = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 30).unwrap();
//! assert_eq!(limits.allowance(25, 0, now), 10);
//! let window = limits.after_claim(10, now).expect("a rate limit keeps a window");
//! let later = ClaimLimits { window: Some(window), ..limits };
//! // Half a minute into the next window, half of the last one still counts.
//! assert_eq!(later.allowance(25, 0, now + chrono::Duration::seconds(60)), 5);
//! ```
//!
//! [`JobClaimParams::limited`]: crate::JobClaimParams::limited

use chrono::{DateTime, Duration, Utc};

/// At most `allowed` jobs of a queue start in any `period_secs` seconds, across the
/// cluster. Validated with [`validate_rate_limit`](crate::validation::validate_rate_limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Jobs per period.
    pub allowed: u32,
    /// The period, in seconds.
    pub period_secs: u32,
}

/// A rate limit's usage as stored: the fixed window that began at `start`, how many jobs
/// started in it, and how many in the window before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateWindow {
    /// Where the current window began (a multiple of the period since the Unix epoch).
    pub start: DateTime<Utc>,
    /// Jobs started in it.
    pub used: i64,
    /// Jobs started in the window before it.
    pub used_before: i64,
}

/// What a claim on a limited queue reads under the queue's row lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLimits {
    /// At most this many of the queue's jobs running at once, across the cluster.
    pub global_limit: Option<i64>,
    /// The rate limit.
    pub rate: Option<RateLimit>,
    /// The rate's stored usage (`None` before the first limited claim).
    pub window: Option<RateWindow>,
}

impl ClaimLimits {
    /// The limits as a backend stores them: the settings' `global_limit`, `rate_allowed`
    /// and `rate_period_secs`, and the usage columns. A rate missing a part, or out of
    /// range, is no rate limit.
    pub fn stored(
        global_limit: Option<i64>,
        rate_allowed: Option<i64>,
        rate_period_secs: Option<i64>,
        window: Option<RateWindow>,
    ) -> ClaimLimits {
        let rate = match (rate_allowed, rate_period_secs) {
            (Some(allowed), Some(period)) => crate::validation::validate_rate_limit(allowed, period).ok(),
            _ => None,
        };
        ClaimLimits { global_limit, rate, window }
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.global_limit.is_some() || self.rate.is_some()
    }

    /// How many of `wanted` jobs a claim may take at `now`, with `running` of the queue's
    /// jobs running across the cluster.
    pub fn allowance(&self, wanted: i64, running: i64, now: DateTime<Utc>) -> i64 {
        let mut allowed = wanted.max(0);
        if let Some(limit) = self.global_limit {
            allowed = allowed.min(limit - running);
        }
        if let Some(rate) = self.rate {
            let window = self.current(rate, now);
            let period_ms = i64::from(rate.period_secs.max(1)) * 1000;
            let elapsed_ms = (now - window.start).num_milliseconds().clamp(0, period_ms);
            // The previous window's share still inside the sliding one, rounded up: a
            // claim never takes a job the exact figure would refuse.
            let share = u64::try_from(window.used_before.saturating_mul(period_ms - elapsed_ms)).unwrap_or(0);
            let carried = i64::try_from(share.div_ceil(period_ms.unsigned_abs())).unwrap_or(i64::MAX);
            allowed =
                allowed.min(i64::from(rate.allowed).saturating_sub(window.used).saturating_sub(carried));
        }
        allowed.max(0)
    }

    /// The usage to store after a claim took `claimed` jobs at `now` (`None` without a
    /// rate limit).
    pub fn after_claim(&self, claimed: i64, now: DateTime<Utc>) -> Option<RateWindow> {
        let rate = self.rate?;
        let mut window = self.current(rate, now);
        window.used += claimed;
        Some(window)
    }

    /// The stored usage moved to the window holding `now`.
    fn current(&self, rate: RateLimit, now: DateTime<Utc>) -> RateWindow {
        let period = Duration::seconds(i64::from(rate.period_secs.max(1)));
        let period_ms = period.num_milliseconds();
        let start_ms = now.timestamp_millis().div_euclid(period_ms) * period_ms;
        let start = DateTime::<Utc>::from_timestamp_millis(start_ms).unwrap_or(now);
        match self.window {
            Some(w) if w.start == start => w,
            Some(w) if w.start + period == start => RateWindow { start, used: 0, used_before: w.used },
            _ => RateWindow { start, used: 0, used_before: 0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone, Utc};

    use super::{ClaimLimits, RateLimit, RateWindow};

    fn rate(allowed: u32, period_secs: u32) -> ClaimLimits {
        ClaimLimits { global_limit: None, rate: Some(RateLimit { allowed, period_secs }), window: None }
    }

    #[test]
    fn a_global_limit_counts_what_runs() {
        let limits = ClaimLimits { global_limit: Some(3), rate: None, window: None };
        let now = Utc::now();
        assert_eq!(limits.allowance(10, 0, now), 3);
        assert_eq!(limits.allowance(2, 0, now), 2);
        assert_eq!(limits.allowance(10, 2, now), 1);
        assert_eq!(limits.allowance(10, 5, now), 0, "lowered below what runs: nothing more");
        assert_eq!(limits.after_claim(3, now), None);
    }

    #[test]
    fn a_rate_slides_across_windows() {
        let start = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).single().expect("a time");
        let limits = rate(10, 60);
        assert_eq!(limits.allowance(100, 0, start), 10);
        let used = limits.after_claim(10, start).expect("a window");
        assert_eq!(used, RateWindow { start, used: 10, used_before: 0 });
        let limits = ClaimLimits { window: Some(used), ..limits };
        assert_eq!(limits.allowance(100, 0, start + Duration::seconds(59)), 0);
        // The next window: the last one counts in full at its start, then less and less.
        assert_eq!(limits.allowance(100, 0, start + Duration::seconds(60)), 0);
        assert_eq!(limits.allowance(100, 0, start + Duration::seconds(75)), 2);
        assert_eq!(limits.allowance(100, 0, start + Duration::seconds(90)), 5);
        let moved = limits.after_claim(5, start + Duration::seconds(90)).expect("a window");
        assert_eq!(moved, RateWindow { start: start + Duration::seconds(60), used: 5, used_before: 10 });
        // Two windows later nothing carries over.
        assert_eq!(limits.allowance(100, 0, start + Duration::seconds(120)), 10);
    }

    #[test]
    fn both_limits_take_the_smaller() {
        let now = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).single().expect("a time");
        let limits = ClaimLimits { global_limit: Some(4), ..rate(3, 10) };
        assert_eq!(limits.allowance(10, 0, now), 3);
        assert_eq!(limits.allowance(10, 2, now), 2);
        assert!(limits.any());
        assert!(!ClaimLimits { global_limit: None, rate: None, window: None }.any());
    }
}
