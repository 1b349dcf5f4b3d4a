//! The rules every setting obeys, in one place: the worker's builder and each maintenance
//! service's config check their values with these, so a zero or absurd setting is a typed
//! error from `build()` instead of a panic inside tokio or a loop that never ends.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest interval, lease or grace period accepted: a week. Longer ones are typos
/// (and overflow tokio's timers when added to now).
pub const MAX_PERIOD: Duration = Duration::from_secs(7 * 24 * 3600);

/// The largest batch any service or claim accepts per statement.
pub const MAX_BATCH: i64 = 100_000;

/// A period that recurs (an interval, a lease): longer than zero, at most [`MAX_PERIOD`].
pub(crate) fn period(option: &'static str, d: Duration) -> Result<()> {
    if d.is_zero() {
        return Err(Error::InvalidOption { option, reason: "must be longer than zero".into() });
    }
    at_most_max_period(option, d)
}

/// A duration that may be zero (a grace period, a timeout), at most [`MAX_PERIOD`].
pub(crate) fn at_most_max_period(option: &'static str, d: Duration) -> Result<()> {
    if d > MAX_PERIOD {
        return Err(Error::InvalidOption {
            option,
            reason: format!("{d:?} is longer than the limit of {MAX_PERIOD:?}"),
        });
    }
    Ok(())
}

/// A count of rows or statements: at least one, at most `max`.
pub(crate) fn count(option: &'static str, n: i64, max: i64) -> Result<()> {
    if n < 1 || n > max {
        return Err(Error::InvalidOption { option, reason: format!("{n}: must be between 1 and {max}") });
    }
    Ok(())
}

/// `longer` must exceed `shorter` (a lease and its renewal, a staleness and a heartbeat).
pub(crate) fn longer_than(
    option: &'static str,
    longer: Duration,
    other: &'static str,
    shorter: Duration,
) -> Result<()> {
    if longer <= shorter {
        return Err(Error::InvalidOption {
            option,
            reason: format!("{longer:?} must be longer than {other} ({shorter:?})"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_absurd_values_are_refused_by_name() {
        assert!(period("poll_interval", Duration::from_millis(1)).is_ok());
        let zero = period("poll_interval", Duration::ZERO).expect_err("zero");
        assert!(matches!(zero, Error::InvalidOption { option: "poll_interval", .. }));
        assert!(period("x", Duration::MAX).is_err());
        assert!(count("batch", 0, MAX_BATCH).is_err());
        assert!(count("batch", MAX_BATCH + 1, MAX_BATCH).is_err());
        assert!(count("batch", 1, MAX_BATCH).is_ok());
        assert!(longer_than("ttl", Duration::from_secs(3), "interval", Duration::from_secs(3)).is_err());
    }
}
