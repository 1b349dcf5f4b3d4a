//! Per-minute outcome counters: added up by each worker and written about once a second,
//! so the dashboard's throughput chart reads 60 small rows instead of counting jobs.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::state::JobState;

/// Outcomes in one minute of the last hour.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// The minute.
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

/// `stats_record`: add `counts` to the counters.
#[derive(Debug, Clone, Copy)]
pub struct StatsRecordParams<'a> {
    /// The counts.
    pub counts: &'a [StatsCount<'a>],
}

/// `stats_prune`: delete counters older than `keep`. Returns how many rows went.
#[derive(Debug, Clone, Copy)]
pub struct StatsPruneParams {
    /// How long to keep them.
    pub keep: Duration,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `stats_throughput`: outcomes per minute over the last hour, oldest first, 60 entries.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatsThroughputParams {}
