//! Every metric the engine emits, through the [`metrics`](https://docs.rs/metrics) crate's
//! facade: names, types, labels and meanings in one list ([`ALL`]), which `docs/guide.md`
//! prints; tests hold the guide (here) and the engine's code (`tests/tests/structure/`) to it.
//!
//! The engine records into whatever recorder the application installs (nothing, if it
//! installs none). [`describe`] registers each metric's help text with it, so that an
//! exporter shows it: with `metrics-exporter-prometheus`,
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
//! jobs_core::metrics::describe();
//! // … start workers; then serve this on `/metrics` (a metric appears in it, with its
//! // help text, once a worker has recorded it):
//! let text: String = prometheus.render();
//! # let _ = text;
//! # Ok(()) }
//! ```

/// What a metric measures over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// A count that only grows (Prometheus: a counter, its name ending in `_total`).
    Counter,
    /// A distribution of observed values (Prometheus: a histogram or a summary).
    Histogram,
}

impl MetricKind {
    /// `counter` or `histogram`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Histogram => "histogram",
        }
    }
}

/// One metric: its name, kind, labels and meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The name, as exporters show it.
    pub name: &'static str,
    /// Counter or histogram.
    pub kind: MetricKind,
    /// The labels every sample carries.
    pub labels: &'static [&'static str],
    /// What it counts or measures.
    pub help: &'static str,
}

macro_rules! metrics_list {
    ($($(#[$doc:meta])* $constant:ident = $name:literal, $kind:ident, [$($label:literal),*], $help:literal;)*) => {
        $(
            $(#[$doc])*
            pub const $constant: &str = $name;
        )*

        /// Every metric the engine emits.
        pub const ALL: &[Metric] = &[$(
            Metric { name: $name, kind: MetricKind::$kind, labels: &[$($label),*], help: $help },
        )*];
    };
}

metrics_list! {
    /// Jobs a worker claimed.
    CLAIMED = "jobs_claimed_total", Counter, ["queue"],
        "Jobs claimed by this node's workers.";
    /// Claim statements a worker ran.
    FETCHES = "jobs_fetches_total", Counter, ["queue"],
        "Claim statements run by this node's workers (each claims up to a batch).";
    /// Claimed jobs handed back unrun at shutdown or when a queue is paused.
    HANDED_BACK = "jobs_buffer_handed_back_total", Counter, [],
        "Jobs claimed ahead and handed back unrun (shutdown, pause), their attempt given back.";
    /// Attempts that completed.
    COMPLETED = "jobs_completed_total", Counter, ["queue", "kind"],
        "Attempts that succeeded.";
    /// Attempts that failed with attempts left (they will be retried).
    FAILED = "jobs_failed_total", Counter, ["queue", "kind"],
        "Attempts that failed (error, panic or timeout) and will be retried.";
    /// Jobs discarded.
    DISCARDED = "jobs_discarded_total", Counter, ["queue", "kind"],
        "Jobs discarded: out of attempts, arguments that no longer decode, or a handler's choice.";
    /// Jobs cancelled while or after running.
    CANCELLED = "jobs_cancelled_total", Counter, ["queue", "kind"],
        "Jobs that ended cancelled (by their handler or a person).";
    /// Jobs that snoozed (or were handed back to wait for a node that knows their kind).
    SNOOZED = "jobs_snoozed_total", Counter, ["queue", "kind"],
        "Attempts that snoozed, or that no node here could run (unknown kind), to run later.";
    /// Completion batches written.
    COMPLETION_BATCHES = "jobs_completion_batches_total", Counter, [],
        "Batches of outcomes the completer wrote (each one to a few statements).";
    /// Jobs taken back from dead or frozen nodes, or past their timeout.
    RESCUED = "jobs_rescued_total", Counter, [],
        "Jobs taken back from a dead node, an orphaned claim or an overrun timeout (leader and heartbeat).";
    /// Seconds from when a job was due to when it started.
    QUEUE_LATENCY = "jobs_queue_latency_seconds", Histogram, ["queue"],
        "Seconds from a job's due time to its claim.";
    /// Seconds an attempt ran.
    DURATION = "jobs_duration_seconds", Histogram, ["queue", "kind"],
        "Seconds an attempt ran (its handler, or until it was stopped).";
}

/// Registers every metric's help text with the installed recorder (call it after
/// installing one; without one it does nothing).
pub fn describe() {
    for metric in ALL {
        match metric.kind {
            MetricKind::Counter => ::metrics::describe_counter!(metric.name, metric.help),
            MetricKind::Histogram => ::metrics::describe_histogram!(metric.name, metric.help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide's table lists every metric with its type and labels, and nothing else.
    #[test]
    fn the_guide_lists_every_metric() {
        let guide = include_str!("../../docs/guide.md");
        let rows: Vec<&str> = guide.lines().filter(|l| l.starts_with("| `jobs_")).collect();
        assert_eq!(rows.len(), ALL.len(), "the guide's metric rows: {rows:#?}");
        for metric in ALL {
            let labels: Vec<String> = metric.labels.iter().map(|l| format!("`{l}`")).collect();
            let labels = if labels.is_empty() { "—".to_owned() } else { labels.join(", ") };
            let expected = format!("| `{}` | {} | {} |", metric.name, metric.kind.as_str(), labels);
            assert!(
                rows.iter().any(|row| row.starts_with(&expected)),
                "no row starting `{expected}` in docs/guide.md"
            );
        }
    }

    #[test]
    fn names_are_unique_and_counters_end_in_total() {
        for (i, metric) in ALL.iter().enumerate() {
            assert!(ALL[..i].iter().all(|m| m.name != metric.name), "{} twice", metric.name);
            assert_eq!(
                metric.kind == MetricKind::Counter,
                metric.name.ends_with("_total"),
                "{}",
                metric.name
            );
        }
    }
}
