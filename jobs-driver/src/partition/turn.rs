//! Where a queue's turn over its keys stands, stored with the queue.

use chrono::{DateTime, Utc};

/// How long the unkeyed group is skipped after a claim found it empty (the first time;
/// each time again, twice as long).
pub const UNKEYED_RECHECK_MS: i64 = 1_000;

/// The longest the unkeyed group is skipped while it stays empty.
pub const UNKEYED_RECHECK_MAX_MS: i64 = 30_000;

/// Where a queue's turn over its keys stands, stored with the queue (as JSON text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionTurn {
    /// The last key served: the next claim starts after it. `None`: a round starts, with
    /// the unkeyed group; `Some("")`: the unkeyed group was served, the keys come next.
    pub after: Option<String>,
    /// The last key of the round under way (the greatest key waiting when it began): keys
    /// that appear after it wait for the next round, so that a stream of new keys cannot
    /// keep a round from ending and the keys before the turn from having theirs.
    pub round_end: Option<String>,
    /// When a claim last found the unkeyed group empty.
    pub unkeyed_empty_at: Option<DateTime<Utc>>,
    /// How long the unkeyed group is skipped since then, in milliseconds: from
    /// [`UNKEYED_RECHECK_MS`], doubled each time it is found empty again, up to
    /// [`UNKEYED_RECHECK_MAX_MS`].
    pub unkeyed_skip_ms: i64,
}

impl PartitionTurn {
    /// The turn as stored (`None` or unreadable text: a round starts).
    pub fn decode(stored: Option<&str>) -> PartitionTurn {
        let Some(value) = stored.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
            return PartitionTurn::default();
        };
        let text = |name: &str| value.get(name).and_then(|a| a.as_str()).map(str::to_owned);
        let unkeyed_empty_at = value
            .get("unkeyed_empty_at")
            .and_then(|t| t.as_i64())
            .and_then(DateTime::<Utc>::from_timestamp_millis);
        PartitionTurn {
            after: text("after"),
            round_end: text("round_end"),
            unkeyed_empty_at,
            unkeyed_skip_ms: value.get("unkeyed_skip_ms").and_then(|t| t.as_i64()).unwrap_or(0),
        }
    }

    /// The turn as stored: a JSON object.
    pub fn encode(&self) -> String {
        serde_json::json!({
            "after": self.after,
            "round_end": self.round_end,
            "unkeyed_empty_at": self.unkeyed_empty_at.map(|t| t.timestamp_millis()),
            "unkeyed_skip_ms": self.unkeyed_skip_ms,
        })
        .to_string()
    }

    pub(super) fn unkeyed_due(&self, now: DateTime<Utc>) -> bool {
        let skip = self.unkeyed_skip_ms.max(UNKEYED_RECHECK_MS);
        self.unkeyed_empty_at.is_none_or(|at| (now - at).num_milliseconds() >= skip || now < at)
    }

    /// The unkeyed group was looked for at `now` and `found` jobs.
    pub(super) fn unkeyed_found(&mut self, found: bool, now: DateTime<Utc>) {
        if found {
            (self.unkeyed_empty_at, self.unkeyed_skip_ms) = (None, 0);
        } else {
            self.unkeyed_empty_at = Some(now);
            self.unkeyed_skip_ms = match self.unkeyed_skip_ms {
                0 => UNKEYED_RECHECK_MS,
                ms => ms.saturating_mul(2).min(UNKEYED_RECHECK_MAX_MS),
            };
        }
    }
}
