//! Times as the schema stores them: `DATETIME(6)` in UTC, which diesel reads as a
//! `NaiveDateTime`.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

/// `t` as a stored time.
pub(crate) fn naive(t: DateTime<Utc>) -> NaiveDateTime {
    t.naive_utc()
}

/// An optional time (the operation's injected clock; `None`: the database's).
pub(crate) fn naive_opt(t: Option<DateTime<Utc>>) -> Option<NaiveDateTime> {
    t.map(naive)
}

/// A stored time as UTC.
pub(crate) fn utc(t: NaiveDateTime) -> DateTime<Utc> {
    t.and_utc()
}

/// Microseconds of `d`, saturating (for `INTERVAL … MICROSECOND`).
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
