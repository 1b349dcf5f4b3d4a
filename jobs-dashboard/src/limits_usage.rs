//! How much of each queue's limits is in use, and why its jobs wait, as the queues page
//! says it: the limits in force (those stored, and where none is stored those the live
//! nodes declare in their heartbeats), read once per limited queue
//! (`Driver::queue_limits_usage`: the running jobs per key, the busiest keys' waiting
//! jobs, the rate's starts), worded here.

use chrono::{DateTime, Utc};
use jobs_core::driver::{ClaimLimits, LimitsUsage, QueueDepth, QueueSettings};

use crate::view::thousands;

/// How many of the busiest keys the page lists per queue.
pub(crate) const BUSIEST_KEYS: usize = 5;

/// The most waiting jobs counted per listed key (more reads as "1,000+"): each count
/// reads up to this many index entries, on every refresh of the page.
pub(crate) const WAITING_CAP: i64 = 1_000;

/// Where some of a queue's limits in force come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// All are stored (or there are none).
    Stored,
    /// Every live node serving the queue declares the same ones.
    ByWorkers,
    /// Its live nodes declare different ones (or some none): each claims under its own;
    /// shown are the first node's.
    Disagree,
}

impl Declared {
    /// What the page says of it, if anything.
    pub(crate) fn hint(self) -> Option<&'static str> {
        match self {
            Declared::Stored => None,
            Declared::ByWorkers => Some("limits declared by its workers"),
            Declared::Disagree => {
                Some("its workers declare different limits, each claiming under its own: shown, one node's")
            }
        }
    }
}

/// `stored` (what `set_queue_limits` keeps, if anything) with each limit it leaves unset
/// taken from what the live nodes serving `queue` declare for it (each heartbeat's
/// `declared`, in `by_node`; see `QueueConfig::per_key_limit` and `#[job(limit)]`), as
/// claims apply them; and where they come from.
pub(crate) fn in_force(
    queue: &str,
    stored: Option<&QueueSettings>,
    by_node: &[Option<serde_json::Value>],
) -> (QueueSettings, Declared) {
    let declared = by_node.iter().flatten().next();
    let agree = by_node.iter().all(|d| d.as_ref() == declared);
    let mut settings = stored.cloned().unwrap_or_else(|| QueueSettings {
        queue: queue.to_owned(),
        paused: false,
        concurrency: None,
        global_limit: None,
        per_key_limit: None,
        rate_allowed: None,
        rate_period_secs: None,
        per_key_rate_allowed: None,
        per_key_rate_period_secs: None,
    });
    let Some(declared) = declared else { return (settings, Declared::Stored) };
    let field = |name: &str| declared.get(name).and_then(serde_json::Value::as_i64);
    let limits = |s: &QueueSettings| (s.global_limit, s.per_key_limit, s.rate(), s.per_key_rate());
    let before = limits(&settings);
    settings.global_limit = settings.global_limit.or(field("global_limit"));
    settings.per_key_limit = settings.per_key_limit.or(field("per_key_limit"));
    if settings.rate().is_none() {
        settings.rate_allowed = field("rate_allowed");
        settings.rate_period_secs = field("rate_period_secs");
    }
    if settings.per_key_rate().is_none() {
        settings.per_key_rate_allowed = field("per_key_rate_allowed");
        settings.per_key_rate_period_secs = field("per_key_rate_period_secs");
    }
    let source = match (before != limits(&settings), agree) {
        (false, _) => Declared::Stored,
        (true, true) => Declared::ByWorkers,
        (true, false) => Declared::Disagree,
    };
    (settings, source)
}

/// One limited queue's usage, worded.
pub(crate) struct LimitsLine {
    pub(crate) queue: String,
    /// What the page says of the limits the workers declare, if any is in force.
    pub(crate) declared: Option<&'static str>,
    /// "37 of 40 running" (the global limit), or how many run.
    pub(crate) running: String,
    /// "512 of 600 started in the last minute", if the queue has a rate.
    pub(crate) rate: Option<String>,
    /// "120 keys running, 15 at their limit of 3", if any job runs.
    pub(crate) keys: Option<String>,
    /// "4 keys used up their 10 per minute", if the queue has a rate per key.
    pub(crate) key_rate: Option<String>,
    /// The busiest keys, most running first.
    pub(crate) busiest: Vec<BusyKey>,
}

/// One of the busiest keys.
pub(crate) struct BusyKey {
    /// The key, or "(no key)" for the unkeyed jobs.
    pub(crate) key: String,
    pub(crate) running: i64,
    /// "204 waiting", "1,000+ waiting", or empty where not counted.
    pub(crate) waiting: String,
    /// The key is at the per-key limit.
    pub(crate) at_limit: bool,
}

impl LimitsLine {
    /// `queue`'s line: `depth` counts its running jobs, `settings` holds its limits.
    pub(crate) fn new(
        depth: &QueueDepth,
        settings: &QueueSettings,
        declared: Declared,
        usage: &LimitsUsage,
        now: DateTime<Utc>,
    ) -> LimitsLine {
        let running = match settings.global_limit {
            Some(limit) => format!("{} of {} running", thousands(depth.running), thousands(limit)),
            None => format!("{} running", thousands(depth.running)),
        };
        let rate = settings.rate().map(|rate| {
            let started = started(settings, usage, now);
            let period = crate::queue_settings::describe_period(i64::from(rate.period_secs));
            format!(
                "{} of {} started in the last {period}",
                thousands(started),
                thousands(i64::from(rate.allowed))
            )
        });
        let keys = (usage.keys_running > 0).then(|| {
            let running =
                format!("{} {} running", thousands(usage.keys_running), plural(usage.keys_running, "key"));
            match settings.per_key_limit {
                Some(limit) => {
                    format!("{running}, {} at their limit of {limit}", thousands(usage.keys_at_limit))
                }
                None => running,
            }
        });
        let key_rate = settings.per_key_rate().map(|rate| {
            let n = usage.keys_rate_used_up;
            format!(
                "{} {} used up {} {}",
                thousands(n),
                plural(n, "key"),
                if n == 1 { "its" } else { "their" },
                crate::queue_settings::describe_rate(rate)
            )
        });
        let busiest = usage
            .busiest
            .iter()
            .map(|k| BusyKey {
                key: k.key.clone().unwrap_or_else(|| "(no key)".to_owned()),
                running: k.running,
                waiting: match k.available {
                    Some(n) if n >= WAITING_CAP => format!("{}+ waiting", thousands(WAITING_CAP)),
                    Some(n) => format!("{} waiting", thousands(n)),
                    None => String::new(),
                },
                at_limit: settings.per_key_limit.is_some_and(|limit| k.running >= limit),
            })
            .collect();
        LimitsLine {
            queue: settings.queue.clone(),
            declared: declared.hint(),
            running,
            rate,
            keys,
            key_rate,
            busiest,
        }
    }
}

impl LimitsLine {
    /// `queue`'s line when its usage could not be read.
    pub(crate) fn unreadable(queue: &str, declared: Declared) -> LimitsLine {
        LimitsLine {
            queue: queue.to_owned(),
            declared: declared.hint(),
            running: "its usage could not be read (the log says why)".to_owned(),
            rate: None,
            keys: None,
            key_rate: None,
            busiest: Vec::new(),
        }
    }
}

/// The starts the next claim counts against the queue's rate.
fn started(settings: &QueueSettings, usage: &LimitsUsage, now: DateTime<Utc>) -> i64 {
    ClaimLimits::stored(
        None,
        None,
        settings.rate_allowed,
        settings.rate_period_secs,
        usage.rate_window.clone(),
    )
    .started(now)
}

fn plural(n: i64, word: &str) -> String {
    if n == 1 { word.to_owned() } else { format!("{word}s") }
}

/// Why `depth`'s jobs wait, most binding first: the queue is paused, at its global limit,
/// out of its rate, keys at their limit; scheduled for later; waiting to retry. Empty when
/// nothing waits. `usage` is read only for limited queues.
pub(crate) fn why_waiting(
    depth: &QueueDepth,
    settings: Option<&QueueSettings>,
    usage: Option<&LimitsUsage>,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut why = Vec::new();
    let available = depth.available;
    if available > 0 {
        let all = format!("{} available", thousands(available));
        if depth.paused {
            why.push(format!("paused: {all} wait for a resume"));
        } else if let Some(settings) = settings {
            if let Some(limit) = settings.global_limit.filter(|&l| depth.running >= l) {
                why.push(format!(
                    "at its global limit ({}): {all} wait for a running job to end",
                    thousands(limit)
                ));
            }
            if let (Some(rate), Some(usage)) = (settings.rate(), usage)
                && started(settings, usage, now) >= i64::from(rate.allowed)
            {
                why.push(format!("rate used up: {all} wait for starts to leave the last period"));
            }
            if let (Some(limit), Some(usage)) = (settings.per_key_limit, usage)
                && usage.keys_at_limit > 0
            {
                let keys =
                    format!("{} {}", thousands(usage.keys_at_limit), plural(usage.keys_at_limit, "key"));
                let rest = if usage.keys_at_limit == 1 {
                    "starts no more until one of its jobs ends"
                } else {
                    "start no more until one of theirs ends"
                };
                why.push(format!("{keys} at the per-key limit ({limit}) {rest}"));
            }
            if let (Some(rate), Some(usage)) = (settings.per_key_rate(), usage)
                && usage.keys_rate_used_up > 0
            {
                let n = usage.keys_rate_used_up;
                why.push(format!(
                    "rate per key ({}) used up by {} {}: {} start again as starts leave the last {}",
                    crate::queue_settings::describe_rate(rate),
                    thousands(n),
                    plural(n, "key"),
                    if n == 1 { "its jobs" } else { "their jobs" },
                    crate::queue_settings::describe_period(i64::from(rate.period_secs))
                ));
            }
        }
    }
    if depth.scheduled > 0 {
        why.push(format!("{} scheduled for later", thousands(depth.scheduled)));
    }
    if depth.retryable > 0 {
        why.push(format!("{} waiting to retry", thousands(depth.retryable)));
    }
    why
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use jobs_core::driver::{KeyLoad, LimitsUsage, QueueDepth, QueueSettings};

    use super::{LimitsLine, why_waiting};

    fn depth(available: i64, scheduled: i64, running: i64, paused: bool) -> QueueDepth {
        QueueDepth {
            queue: "exports".into(),
            available,
            scheduled,
            running,
            retryable: 0,
            oldest_available_secs: None,
            paused,
        }
    }

    fn settings(global_limit: Option<i64>, per_key_limit: Option<i64>) -> QueueSettings {
        QueueSettings {
            queue: "exports".into(),
            paused: false,
            concurrency: None,
            global_limit,
            per_key_limit,
            rate_allowed: None,
            rate_period_secs: None,
            per_key_rate_allowed: None,
            per_key_rate_period_secs: None,
        }
    }

    #[test]
    fn the_reasons_jobs_wait_are_said_most_binding_first() {
        let now = Utc::now();
        assert!(why_waiting(&depth(0, 0, 3, false), None, None, now).is_empty());
        assert_eq!(
            why_waiting(&depth(5, 2, 0, true), None, None, now),
            ["paused: 5 available wait for a resume", "2 scheduled for later"]
        );
        let usage = LimitsUsage { keys_running: 3, keys_at_limit: 1, ..LimitsUsage::default() };
        let limited = settings(Some(40), Some(3));
        assert_eq!(
            why_waiting(&depth(1200, 0, 40, false), Some(&limited), Some(&usage), now),
            [
                "at its global limit (40): 1,200 available wait for a running job to end",
                "1 key at the per-key limit (3) starts no more until one of its jobs ends"
            ]
        );
        assert!(
            why_waiting(&depth(1200, 0, 39, false), Some(&settings(Some(40), None)), Some(&usage), now)
                .is_empty()
        );
        let per_key_rate = QueueSettings {
            per_key_rate_allowed: Some(10),
            per_key_rate_period_secs: Some(60),
            ..settings(None, None)
        };
        let used_up = LimitsUsage { keys_rate_used_up: 1, ..LimitsUsage::default() };
        assert_eq!(
            why_waiting(&depth(7, 0, 0, false), Some(&per_key_rate), Some(&used_up), now),
            [
                "rate per key (10 per minute) used up by 1 key: its jobs start again as starts leave the last minute"
            ]
        );
    }

    #[test]
    fn a_limits_line_lists_the_busiest_keys() {
        let usage = LimitsUsage {
            rate_window: None,
            keys_running: 2,
            keys_at_limit: 1,
            keys_rate_used_up: 0,
            busiest: vec![
                KeyLoad { key: Some("acme".into()), running: 3, available: Some(1_000) },
                KeyLoad { key: None, running: 1, available: None },
            ],
        };
        let line = LimitsLine::new(
            &depth(10, 0, 4, false),
            &settings(Some(40), Some(3)),
            super::Declared::Stored,
            &usage,
            Utc::now(),
        );
        assert_eq!(line.running, "4 of 40 running");
        assert_eq!(line.keys.as_deref(), Some("2 keys running, 1 at their limit of 3"));
        assert_eq!(
            (line.busiest[0].key.as_str(), line.busiest[0].waiting.as_str()),
            ("acme", "1,000+ waiting")
        );
        assert!(line.busiest[0].at_limit);
        assert_eq!((line.busiest[1].key.as_str(), line.busiest[1].waiting.as_str()), ("(no key)", ""));
    }

    #[test]
    fn a_nodes_declared_limits_apply_where_none_is_stored() {
        use super::{Declared, in_force};
        let declared = serde_json::json!({"global_limit": null, "per_key_limit": 2, "rate_allowed": 10, "rate_period_secs": 60});
        let both = [Some(declared.clone()), Some(declared.clone())];
        let (alone, source) = in_force("exports", None, &both);
        assert_eq!(source, Declared::ByWorkers);
        assert_eq!((alone.global_limit, alone.per_key_limit, alone.rate_allowed), (None, Some(2), Some(10)));
        let stored = settings(Some(40), Some(3));
        let (merged, source) = in_force("exports", Some(&stored), &both[..1]);
        assert_eq!(source, Declared::ByWorkers, "the rate is the node's");
        assert_eq!(
            (merged.global_limit, merged.per_key_limit, merged.rate_allowed),
            (Some(40), Some(3), Some(10))
        );
        // A stored rate wins over the declared one: nothing is the node's.
        let with_rate = QueueSettings { rate_allowed: Some(5), rate_period_secs: Some(1), ..stored.clone() };
        let (kept, source) = in_force("exports", Some(&with_rate), &both);
        assert_eq!((source, kept), (Declared::Stored, with_rate));
        // Nodes that disagree, or one that declares nothing: said so.
        let other = serde_json::json!({"per_key_limit": 1});
        assert_eq!(in_force("exports", None, &[Some(declared.clone()), Some(other)]).1, Declared::Disagree);
        assert_eq!(in_force("exports", None, &[None, Some(declared)]).1, Declared::Disagree);
        assert_eq!(in_force("exports", Some(&stored), &[]), (stored, Declared::Stored));
    }
}
