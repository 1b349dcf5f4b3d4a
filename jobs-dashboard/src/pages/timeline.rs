//! A job's timeline, in time order: created, due, each attempt's start and end (with its
//! node and how long it ran), snoozes, failures and when the retry is due, the request to
//! cancel, and the final state. Built from the row: its times, `attempted_by` and the
//! `errors` entries (one per attempt that did not complete). Times are exact (the page's
//! script leaves them), each with the time since the line before, so backoff gaps read
//! at a glance.

use chrono::{DateTime, Utc};
use jobs_core::{JobRow, JobState};
use serde_json::Value;

use crate::view::{self, human_duration};

/// One line of the timeline.
pub(crate) struct Event {
    /// When, for ordering.
    pub(crate) at: DateTime<Utc>,
    /// The time as a `<time>` element, exact.
    pub(crate) when: String,
    /// The time since the line before (`+4.2 s`), empty on the first line.
    pub(crate) gap: String,
    /// What happened: `created`, `attempt 2 started`, `attempt 2 failed`, …
    pub(crate) what: String,
    /// Node, duration, error type, …
    pub(crate) detail: String,
    /// A CSS class: `ok`, `failed`, `snoozed`, `due`, `final`.
    pub(crate) class: &'static str,
    /// Not yet happened (a retry or a scheduled run still due).
    pub(crate) upcoming: bool,
}

fn parse_time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn ran(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    human_duration((end - start).num_milliseconds().max(0) as f64 / 1000.0)
}

/// The events of `job`, oldest first, as of `now`.
pub(crate) fn events(job: &JobRow, now: DateTime<Utc>) -> Vec<Event> {
    let mut events = Vec::new();
    let mut push = |at: DateTime<Utc>, what: String, detail: String, class: &'static str| {
        events.push(Event {
            at,
            when: view::time_exact_html(&at),
            gap: String::new(),
            what,
            detail,
            class,
            upcoming: at > now,
        });
    };
    push(job.created_at, "created".into(), format!("in queue {}, priority {}", job.queue, job.priority), "");
    let entries = job.errors.as_array().map(Vec::as_slice).unwrap_or_default();
    // A job that was due later than its creation, and has not run since: when it is due.
    if job.state == JobState::Pending {
        push(job.scheduled_at, "due".into(), "runs once the jobs it depends on are done".into(), "due");
    } else if job.scheduled_at > job.created_at + chrono::TimeDelta::milliseconds(1)
        && job.attempted_at.is_none()
    {
        push(job.scheduled_at, "due".into(), "scheduled to run at this time".into(), "due");
    }
    for e in entries {
        let attempt = e.get("attempt").and_then(Value::as_i64).unwrap_or(0);
        let node = e.get("node").and_then(Value::as_str).unwrap_or("?");
        let error_type = e.get("error_type").and_then(Value::as_str).unwrap_or("error");
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        let start = parse_time(e.get("attempted_at"));
        let end = parse_time(e.get("at"));
        if let Some(start) = start {
            push(start, format!("attempt {attempt} started"), format!("on {node}"), "");
        }
        if let Some(end) = end {
            // How long it ran goes with what happened, apart from the error's own text.
            let took = start.map(|s| format!(" after {}", ran(s, end))).unwrap_or_default();
            let (what, class) = match error_type {
                JobRow::SNOOZED => (format!("attempt {attempt} snoozed{took}"), "snoozed"),
                "shutdown" => (format!("attempt {attempt} handed back{took}"), "snoozed"),
                _ => (format!("attempt {attempt} failed{took}"), "failed"),
            };
            let detail = if error_type == JobRow::SNOOZED {
                format!("{message}; the attempt is not counted")
            } else {
                format!("{error_type}: {}", clip(message))
            };
            push(end, what, detail, class);
        }
        if let Some(retry_at) = parse_time(e.get("retry_at")) {
            push(retry_at, "due again".into(), format!("after attempt {attempt}"), "due");
        }
    }
    // The latest attempt, when no entry covers it (it is running or it completed).
    let covered = |t: DateTime<Utc>| entries.iter().any(|e| parse_time(e.get("attempted_at")) == Some(t));
    if let Some(started) = job.attempted_at.filter(|t| !covered(*t)) {
        let node = job.attempted_by.last().cloned().unwrap_or_default();
        push(started, format!("attempt {} started", job.attempt), format!("on {node}"), "");
        if job.state == JobState::Completed
            && let Some(end) = job.finalized_at
        {
            push(
                end,
                format!("attempt {} completed after {}", job.attempt, ran(started, end)),
                String::new(),
                "ok",
            );
        }
    }
    if let Some(at) = job.cancel_requested_at {
        push(at, "cancellation requested".into(), String::new(), "failed");
    }
    if let Some(end) = job.finalized_at {
        push(end, job.state.as_str().to_owned(), "final".into(), "final");
    }
    // Stable: events at the same instant keep the order they happen in.
    events.sort_by_key(|e| e.at);
    for i in 1..events.len() {
        let gap = events[i].at - events[i - 1].at;
        if gap > chrono::TimeDelta::zero() {
            events[i].gap = format!("+{}", human_duration(gap.num_milliseconds() as f64 / 1000.0));
        }
    }
    events
}

fn clip(message: &str) -> String {
    if message.chars().count() > 200 {
        format!("{}…", message.chars().take(200).collect::<String>())
    } else {
        message.to_owned()
    }
}
