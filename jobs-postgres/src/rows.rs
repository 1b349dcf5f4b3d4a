//! The one-column rows (declared once, in `jobs_driver::rows`) and bound durations.

pub(crate) use jobs_driver::rows::{Count, Flag, Id, Name};

/// Milliseconds of `d` for a bound parameter, saturating.
pub(crate) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
