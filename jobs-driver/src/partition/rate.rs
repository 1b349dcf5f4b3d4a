//! A rate limit per key: each key's starts counted apart, in `job_key_rates`.

use chrono::{DateTime, Utc};

use crate::queue_limits::RateWindow;

/// The key text under which the unkeyed group's usage is stored (no partition key is
/// empty: [`validate_partition_key`](crate::validation::validate_partition_key)).
pub const UNKEYED_RATE_KEY: &str = "";

/// The text a key's usage is stored under (`None`: the unkeyed group, [`UNKEYED_RATE_KEY`]).
pub fn rate_key(key: Option<&str>) -> &str {
    key.unwrap_or(UNKEYED_RATE_KEY)
}

/// One key's rate usage, a row of `job_key_rates`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRate {
    /// The key's text ([`rate_key`]).
    pub key: String,
    /// Its starts per slice (see [`RateWindow`]).
    pub window: RateWindow,
    /// Until when its rate is used up (`None`: it may start one now). Claims count the
    /// keys blocked so to walk far enough past them.
    pub blocked_until: Option<DateTime<Utc>>,
}

impl KeyRate {
    /// A row as stored: its key, `window_start`, `counts` (JSON text; unreadable counts
    /// count no start) and `blocked_until`.
    pub fn decode(
        key: String,
        window_start: DateTime<Utc>,
        counts: &str,
        blocked_until: Option<DateTime<Utc>>,
    ) -> KeyRate {
        let window = RateWindow::decode(Some(window_start), Some(counts))
            .unwrap_or(RateWindow { start: window_start, counts: Vec::new() });
        KeyRate { key, window, blocked_until }
    }
}
