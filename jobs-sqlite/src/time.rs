//! Times as the schema stores them: INTEGER milliseconds since the Unix epoch, UTC.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// `t` in stored milliseconds.
pub(crate) fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// Stored milliseconds as a time (out of range: the epoch, which no writer stores).
pub(crate) fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::UNIX_EPOCH)
}

/// Stored milliseconds as the JSON an error entry's `at` holds (as the engine writes it).
pub(crate) fn at_json(ms: i64) -> String {
    serde_json::to_string(&from_ms(ms)).unwrap_or_else(|_| "null".into())
}

/// Stored milliseconds, when present, as a time.
pub(crate) fn from_ms_opt(ms: Option<i64>) -> Option<DateTime<Utc>> {
    ms.map(from_ms)
}

/// The operation's time in stored milliseconds: the injected clock's, or the host's.
/// (SQLite runs in this process, so "the database's clock" is this host's clock.)
pub(crate) fn now_ms(now: Option<DateTime<Utc>>) -> i64 {
    to_ms(now.unwrap_or_else(Utc::now))
}

/// Milliseconds of `d`, saturating.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
