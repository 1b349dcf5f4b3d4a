//! A queue's cluster-wide limits, which every node's claims obey together: a global limit
//! (at most this many of its jobs running across the cluster) and a rate limit (at most
//! this many started in any period). Stored in `job_queues` (the limits in `settings`, the
//! rate's usage in `rate_window` and `rate_counts`); a claim on a limited queue runs in a
//! transaction holding the queue's row, so that claims from every node are counted one
//! after another (see [`JobClaimParams::limited`]).
//!
//! The rate counts starts in [`RATE_SLOTS`] slices of the period, plus the slice before
//! them: a claim at `t` sees every start since at least `t - period`, so no stretch of one
//! period ever holds more than `allowed` starts. The price is that a slice's starts count
//! until a whole period after the slice ends: a queue started flat out runs at about
//! `RATE_SLOTS / (RATE_SLOTS + 1)` of the rate (95 %), never above it.
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use jobs_driver::{ClaimLimits, RateLimit};
//!
//! let limits = ClaimLimits::stored(None, None, Some(10), Some(60), None);
//! let now = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 30).unwrap();
//! assert_eq!(limits.allowance(25, 0, now), 10);
//! let window = limits.after_claim(10, now).expect("a rate limit keeps a window");
//! let later = ClaimLimits { window: Some(window), ..limits };
//! // A minute later the ten still count; a slice (3 s) after that, they no longer do.
//! assert_eq!(later.allowance(25, 0, now + chrono::Duration::seconds(60)), 0);
//! assert_eq!(later.allowance(25, 0, now + chrono::Duration::seconds(63)), 10);
//! ```
//!
//! [`JobClaimParams::limited`]: crate::JobClaimParams::limited

use chrono::{DateTime, Utc};

/// The slices a rate's period is counted in (see the module docs).
pub const RATE_SLOTS: usize = 20;

/// The most jobs a rate limit may allow per period.
pub const MAX_RATE_ALLOWED: u32 = 1_000_000;

/// The longest rate-limit period: a day.
pub const MAX_RATE_PERIOD_SECS: u32 = 86_400;

/// At most `allowed` jobs of a queue start in any `period_secs` seconds, across the
/// cluster. Validated with [`validate_rate_limit`](crate::validation::validate_rate_limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Jobs per period.
    pub allowed: u32,
    /// The period, in seconds.
    pub period_secs: u32,
}

impl RateLimit {
    /// The rate if `allowed` (1 to [`MAX_RATE_ALLOWED`]) and `period_secs` (1 to
    /// [`MAX_RATE_PERIOD_SECS`]) are in range.
    pub fn new(allowed: i64, period_secs: i64) -> Option<RateLimit> {
        let allowed = u32::try_from(allowed).ok().filter(|a| (1..=MAX_RATE_ALLOWED).contains(a))?;
        let period_secs =
            u32::try_from(period_secs).ok().filter(|p| (1..=MAX_RATE_PERIOD_SECS).contains(p))?;
        Some(RateLimit { allowed, period_secs })
    }

    /// A slice of the period, in milliseconds.
    fn slot_ms(self) -> i64 {
        (i64::from(self.period_secs) * 1000 / RATE_SLOTS as i64).max(1)
    }

    /// The starts a claim at `now` counts, with `stored` as the usage: those of the last
    /// period, and of the slice before it (see the module docs).
    pub fn started(self, stored: Option<&RateWindow>, now: DateTime<Utc>) -> i64 {
        self.current(stored, now).counts.iter().sum()
    }

    /// How many more may start at `now`, with `stored` as the usage (never below 0).
    pub fn left(self, stored: Option<&RateWindow>, now: DateTime<Utc>) -> i64 {
        (i64::from(self.allowed) - self.started(stored, now)).max(0)
    }

    /// The usage to store after `claimed` started at `now`.
    pub fn after(self, stored: Option<&RateWindow>, claimed: i64, now: DateTime<Utc>) -> RateWindow {
        let mut window = self.current(stored, now);
        if let Some(newest) = window.counts.last_mut() {
            *newest += claimed;
        }
        window
    }

    /// When a rate used up in `window` lets one more start again: when enough of its
    /// oldest slices have fallen out (`None`: one may start now).
    pub fn blocked_until(self, window: &RateWindow) -> Option<DateTime<Utc>> {
        let allowed = i64::from(self.allowed);
        let len = window.counts.len();
        let dropped = (0..=len).find(|&m| window.counts[m..].iter().sum::<i64>() < allowed)?;
        if dropped == 0 {
            return None;
        }
        let ms = self.slot_ms().saturating_mul(i64::try_from(dropped).unwrap_or(i64::MAX));
        Some(window.start + chrono::Duration::milliseconds(ms))
    }

    /// When a window begun at `start` no longer counts any start at all (every slice
    /// fallen out): its row may be forgotten.
    pub fn forgotten_after(self, start: DateTime<Utc>) -> DateTime<Utc> {
        let slices = i64::try_from(RATE_SLOTS + 1).unwrap_or(i64::MAX);
        start + chrono::Duration::milliseconds(self.slot_ms().saturating_mul(slices))
    }

    /// The stored usage moved on to the slice holding `now`. A clock behind the stored
    /// slice (another node's, or a transaction's start time) keeps the stored one: it
    /// never forgets starts.
    fn current(self, stored: Option<&RateWindow>, now: DateTime<Utc>) -> RateWindow {
        let slot_ms = self.slot_ms();
        let slot = now.timestamp_millis().div_euclid(slot_ms);
        let start = DateTime::<Utc>::from_timestamp_millis(slot * slot_ms).unwrap_or(now);
        let mut counts = vec![0; RATE_SLOTS + 1];
        let Some(stored) = stored else { return RateWindow { start, counts } };
        // The stored counts, newest last, fitted to the slices (the period may have changed).
        let kept = stored.counts.len().min(counts.len());
        let tail = &stored.counts[stored.counts.len() - kept..];
        let stored_slot = stored.start.timestamp_millis().div_euclid(slot_ms);
        if stored_slot >= slot {
            counts[RATE_SLOTS + 1 - kept..].copy_from_slice(tail);
            return RateWindow { start: stored.start, counts };
        }
        let moved = usize::try_from(slot - stored_slot).unwrap_or(usize::MAX);
        if moved < counts.len() {
            let keep = kept.min(counts.len() - moved);
            let to = counts.len() - moved;
            counts[to - keep..to].copy_from_slice(&tail[kept - keep..]);
        }
        RateWindow { start, counts }
    }
}

/// A rate limit's usage as stored: the starts counted in each slice, oldest first, the
/// newest slice beginning at `start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateWindow {
    /// Where the newest slice began (a multiple of the slice since the Unix epoch).
    pub start: DateTime<Utc>,
    /// Starts per slice, oldest first, [`RATE_SLOTS`] + 1 of them.
    pub counts: Vec<i64>,
}

impl RateWindow {
    /// The window as stored: `rate_window` and `rate_counts` (a JSON array); `None` before
    /// the first limited claim. Counts that are not such an array count as no starts.
    pub fn decode(start: Option<DateTime<Utc>>, counts: Option<&str>) -> Option<RateWindow> {
        let counts = counts.and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        Some(RateWindow { start: start?, counts })
    }

    /// The counts as stored: a JSON array, oldest first.
    pub fn encode_counts(&self) -> String {
        serde_json::Value::from(self.counts.clone()).to_string()
    }
}

/// The limits a worker declares for a queue (on its `QueueConfig`, or through the `limit`
/// of the job kinds it runs there): they apply where the queue's stored settings set no
/// such limit, which therefore override them cluster-wide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeclaredLimits {
    /// At most this many of the queue's jobs running at once, across the cluster.
    pub global_limit: Option<i64>,
    /// At most this many running at once per partition key (see [`crate::partition`]).
    pub per_key_limit: Option<i64>,
    /// At most this many started per period, across the cluster.
    pub rate: Option<RateLimit>,
    /// At most this many started per period per partition key, across the cluster.
    pub per_key_rate: Option<RateLimit>,
}

impl DeclaredLimits {
    /// Whether any limit is declared.
    pub fn any(&self) -> bool {
        self.global_limit.is_some()
            || self.per_key_limit.is_some()
            || self.rate.is_some()
            || self.per_key_rate.is_some()
    }
}

/// What a claim on a limited queue reads under the queue's row lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimLimits {
    /// At most this many of the queue's jobs running at once, across the cluster.
    pub global_limit: Option<i64>,
    /// At most this many of the queue's jobs running at once per partition key.
    pub per_key: Option<i64>,
    /// The rate limit.
    pub rate: Option<RateLimit>,
    /// The rate's stored usage (`None` before the first limited claim).
    pub window: Option<RateWindow>,
    /// The rate limit per partition key (each key's usage is stored apart, see
    /// [`crate::partition`]). [`ClaimLimits::stored`] leaves it unset.
    pub per_key_rate: Option<RateLimit>,
}

impl ClaimLimits {
    /// The limits as a backend stores them: the settings' `global_limit`,
    /// `per_key_limit`, `rate_allowed` and `rate_period_secs`, and the usage columns. A
    /// rate missing a part, or out of range, is no rate limit.
    pub fn stored(
        global_limit: Option<i64>,
        per_key: Option<i64>,
        rate_allowed: Option<i64>,
        rate_period_secs: Option<i64>,
        window: Option<RateWindow>,
    ) -> ClaimLimits {
        let rate = match (rate_allowed, rate_period_secs) {
            (Some(allowed), Some(period)) => RateLimit::new(allowed, period),
            _ => None,
        };
        ClaimLimits { global_limit, per_key, rate, window, per_key_rate: None }
    }

    /// These limits, with `declared` ones where none is stored.
    pub fn or_declared(self, declared: &DeclaredLimits) -> ClaimLimits {
        ClaimLimits {
            global_limit: self.global_limit.or(declared.global_limit),
            per_key: self.per_key.or(declared.per_key_limit),
            rate: self.rate.or(declared.rate),
            window: self.window,
            per_key_rate: self.per_key_rate.or(declared.per_key_rate),
        }
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.global_limit.is_some() || self.keyed() || self.rate.is_some()
    }

    /// Whether a limit applies per partition key (a claim then deals over the keys).
    pub fn keyed(&self) -> bool {
        self.per_key.is_some() || self.per_key_rate.is_some()
    }

    /// How many of `wanted` jobs a claim may take at `now`, with `running` of the queue's
    /// jobs running across the cluster.
    pub fn allowance(&self, wanted: i64, running: i64, now: DateTime<Utc>) -> i64 {
        let mut allowed = wanted.max(0);
        if let Some(limit) = self.global_limit {
            allowed = allowed.min(limit.saturating_sub(running));
        }
        if let Some(rate) = self.rate {
            allowed = allowed.min(rate.left(self.window.as_ref(), now));
        }
        allowed.max(0)
    }

    /// The starts a claim at `now` counts against the rate (0 without one): those of the
    /// last period, and of the slice before it (see the module docs).
    pub fn started(&self, now: DateTime<Utc>) -> i64 {
        self.rate.map_or(0, |rate| rate.started(self.window.as_ref(), now))
    }

    /// The usage to store after a claim took `claimed` jobs at `now` (`None` without a
    /// rate limit).
    pub fn after_claim(&self, claimed: i64, now: DateTime<Utc>) -> Option<RateWindow> {
        Some(self.rate?.after(self.window.as_ref(), claimed, now))
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, TimeZone, Utc};

    use super::{ClaimLimits, DeclaredLimits, RATE_SLOTS, RateLimit, RateWindow};

    fn rate(allowed: u32, period_secs: u32) -> ClaimLimits {
        ClaimLimits {
            global_limit: None,
            per_key: None,
            rate: Some(RateLimit { allowed, period_secs }),
            window: None,
            per_key_rate: None,
        }
    }

    fn noon() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).single().expect("a time")
    }

    /// Claims `wanted` at each second offset from noon, storing the usage as a backend does.
    fn claims(mut limits: ClaimLimits, at: &[(i64, i64)]) -> Vec<i64> {
        at.iter()
            .map(|&(second, wanted)| {
                let now = noon() + Duration::seconds(second);
                let got = limits.allowance(wanted, 0, now);
                limits.window = limits.after_claim(got, now);
                got
            })
            .collect()
    }

    #[test]
    fn a_global_limit_counts_what_runs() {
        let limits =
            ClaimLimits { global_limit: Some(3), ..ClaimLimits::stored(None, None, None, None, None) };
        let now = Utc::now();
        assert_eq!(limits.allowance(10, 0, now), 3);
        assert_eq!(limits.allowance(2, 0, now), 2);
        assert_eq!(limits.allowance(10, 2, now), 1);
        assert_eq!(limits.allowance(10, 5, now), 0, "lowered below what runs: nothing more");
        assert_eq!(limits.after_claim(3, now), None);
    }

    #[test]
    fn no_period_long_stretch_holds_more_than_the_rate() {
        // 10 a minute, in slices of 3 s: 10 at 0:59 still count at 1:58, not at 2:00.
        assert_eq!(claims(rate(10, 60), &[(59, 100), (60, 100), (118, 100), (120, 100)]), [10, 0, 0, 10]);
        // A steady trickle: one claim of 1 a second for ten minutes starts 10 in every
        // minute-long stretch at most, and about 95 % of the rate over all.
        let trickle: Vec<(i64, i64)> = (0..600).map(|s| (s, 1)).collect();
        let got = claims(rate(10, 60), &trickle);
        for start in 0..540 {
            let in_stretch: i64 = got[start..start + 60].iter().sum();
            assert!(in_stretch <= 10, "{in_stretch} started in the minute from {start} s");
        }
        let total: i64 = got.iter().sum();
        assert!((90..=100).contains(&total), "{total} in ten minutes at 10 a minute");
    }

    #[test]
    fn a_clock_behind_the_stored_slice_forgets_nothing() {
        let limits = rate(10, 60);
        let later = noon() + Duration::seconds(30);
        let stored = limits.after_claim(8, later).expect("a window");
        let limits = ClaimLimits { window: Some(stored.clone()), ..limits };
        let behind = noon() + Duration::seconds(20);
        assert_eq!(limits.allowance(10, 0, behind), 2);
        let kept = limits.after_claim(2, behind).expect("a window");
        assert_eq!((kept.start, kept.counts.iter().sum::<i64>()), (stored.start, 10));
    }

    #[test]
    fn a_changed_period_keeps_the_newest_counts() {
        let limits = rate(10, 60);
        let stored = limits.after_claim(7, noon()).expect("a window");
        assert_eq!(stored.counts.len(), RATE_SLOTS + 1);
        // Now 10 a second: the 7 started at noon count for the slices they still cover.
        let faster = ClaimLimits { window: Some(stored), ..rate(10, 1) };
        assert_eq!(faster.allowance(10, 0, noon()), 3);
        assert_eq!(faster.allowance(10, 0, noon() + Duration::seconds(2)), 10);
    }

    #[test]
    fn stored_counts_read_back_and_bad_text_counts_nothing() {
        let window = RateWindow { start: noon(), counts: vec![0, 2, 5] };
        assert_eq!(window.encode_counts(), "[0,2,5]");
        assert_eq!(RateWindow::decode(Some(noon()), Some("[0,2,5]")), Some(window));
        assert_eq!(RateWindow::decode(Some(noon()), Some("garbage")).map(|w| w.counts.len()), Some(0));
        assert_eq!(RateWindow::decode(None, Some("[1]")), None);
    }

    #[test]
    fn both_limits_take_the_smaller() {
        let limits = ClaimLimits { global_limit: Some(4), ..rate(3, 10) };
        assert_eq!(limits.allowance(10, 0, noon()), 3);
        assert_eq!(limits.allowance(10, 2, noon()), 2);
        assert!(limits.any());
        assert!(!ClaimLimits::stored(None, None, None, None, None).any());
        let declared = DeclaredLimits { per_key_limit: Some(1), ..DeclaredLimits::default() };
        let stored = ClaimLimits::stored(None, None, None, None, None);
        assert_eq!(stored.clone().or_declared(&declared).per_key, Some(1));
        let own = ClaimLimits { per_key: Some(3), ..stored };
        assert_eq!(own.or_declared(&declared).per_key, Some(3), "the stored setting wins");
        assert_eq!(RateLimit::new(0, 10), None);
        assert_eq!(RateLimit::new(5, 86_401), None);
    }

    #[test]
    fn a_used_up_rate_says_when_one_more_may_start() {
        let ten = RateLimit { allowed: 10, period_secs: 60 };
        // 4 at noon, 6 at 0:30: used up until the noon slice falls out (a period and a
        // slice after it began), then 4 may start, and all 10 once 0:30's slice is out too.
        let window = ten.after(None, 4, noon());
        let window = ten.after(Some(&window), 6, noon() + Duration::seconds(30));
        assert_eq!(ten.left(Some(&window), noon() + Duration::seconds(30)), 0);
        let until = ten.blocked_until(&window).expect("used up");
        assert_eq!(until, noon() + Duration::seconds(63));
        assert_eq!(ten.left(Some(&window), until - Duration::milliseconds(1)), 0);
        assert_eq!(ten.left(Some(&window), until), 4);
        assert_eq!(ten.blocked_until(&ten.after(None, 9, noon())), None, "one left: not blocked");
        assert_eq!(ten.forgotten_after(window.start), noon() + Duration::seconds(93));
        assert_eq!(ten.left(Some(&window), ten.forgotten_after(window.start)), 10);
        assert_eq!(ten.left(Some(&window), ten.forgotten_after(window.start) - Duration::milliseconds(1)), 4);
    }
}
