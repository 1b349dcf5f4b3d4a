//! Reading filters and forms from requests, with a clear 400 for anything malformed.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use jobs_core::JobFilter;
use jobs_core::JobState;
use jobs_core::driver::JobOrder;

use crate::error::DashboardError;

/// The pairs of a query string or urlencoded body, repeated keys kept.
pub(crate) fn pairs(input: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(input).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

fn one<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, v)| k == key && !v.trim().is_empty()).map(|(_, v)| v.trim())
}

/// A date or time field (RFC 3339, `2026-11-22T10:30` or `2026-11-22`, read as UTC).
pub(crate) fn time(key: &str, value: &str) -> Result<DateTime<Utc>, DashboardError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(value, "%Y-%m-%dT%H:%M") {
        return Ok(t.and_utc());
    }
    if let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
    }
    Err(DashboardError::BadRequest(format!(
        "`{key}` must be a date or time (2026-11-22 or 2026-11-22T10:30), not `{value}`"
    )))
}

/// The jobs filter from `state`, `queue`, `kind`, `tag`, `q` (JSON or `key=value` searches
/// arguments and metadata, only when `can_search`, else a 400 saying the driver cannot;
/// other text is looked for in errors), `error` (text in errors), `from`, `to`,
/// `workflow` (a workflow's or batch's members).
pub(crate) fn filter(pairs: &[(String, String)], can_search: bool) -> Result<JobFilter, DashboardError> {
    let mut filter = JobFilter::default();
    // Postgres cannot hold NUL in text: refuse it here rather than fail in the query.
    if let Some((k, _)) = pairs.iter().find(|(_, v)| v.contains('\0')) {
        return Err(DashboardError::BadRequest(format!("`{k}` contains a NUL character")));
    }
    for (k, v) in pairs {
        if k == "state" && !v.is_empty() {
            let state: JobState =
                v.parse().map_err(|_| DashboardError::BadRequest(format!("unknown state `{v}`")))?;
            if !filter.states.contains(&state) {
                filter.states.push(state);
            }
        }
    }
    filter.queue = one(pairs, "queue").map(str::to_owned);
    filter.kind = one(pairs, "kind").map(str::to_owned);
    filter.tag = one(pairs, "tag").map(str::to_owned);
    filter.workflow = one(pairs, "workflow")
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                DashboardError::BadRequest(format!("`workflow` must be a workflow id, not `{v}`"))
            })
        })
        .transpose()?;
    if let Some(q) = one(pairs, "q") {
        if q.starts_with('{') || q.contains('=') {
            if !can_search {
                return Err(DashboardError::BadRequest(
                    "this database cannot search arguments and metadata (its driver lacks JSON containment search)"
                        .into(),
                ));
            }
            filter.search = Some(search(q)?);
        } else {
            // Anything else is text to find in the jobs' errors.
            filter.error = Some(q.to_owned());
        }
    }
    if let Some(text) = one(pairs, "error") {
        filter.error = Some(text.to_owned());
    }
    filter.order = match one(pairs, "sort") {
        None | Some("newest") => JobOrder::NewestFirst,
        Some("oldest") => JobOrder::OldestFirst,
        Some("due") => JobOrder::DueSoonest,
        Some("finished") => JobOrder::RecentlyFinished,
        Some(other) => {
            return Err(DashboardError::BadRequest(format!(
                "`sort` is newest, oldest, due or finished, not `{other}`"
            )));
        }
    };
    // Only orders an index serves: a sort of millions of rows would take seconds.
    if !filter.order.served_for(&filter.states) {
        return Err(DashboardError::BadRequest(match filter.order {
            JobOrder::DueSoonest => "sorting by due time needs the scheduled or retryable state, and only those".into(),
            _ => "sorting by finish time needs finished states (completed, discarded, cancelled), and only those".into(),
        }));
    }
    filter.from = one(pairs, "from").map(|v| time("from", v)).transpose()?;
    filter.to = one(pairs, "to").map(|v| time("to", v)).transpose()?;
    Ok(filter)
}

/// `{"user_id": 7}` as JSON, or `user_id=7` (the value read as JSON when it parses,
/// else as a string).
fn search(q: &str) -> Result<serde_json::Value, DashboardError> {
    if q.starts_with('{') {
        if jobs_core::stored_text::holds_nul(q) {
            return Err(DashboardError::BadRequest("search contains a NUL character".into()));
        }
        let value: serde_json::Value = serde_json::from_str(q)
            .map_err(|e| DashboardError::BadRequest(format!("search is not valid JSON: {e}")))?;
        return Ok(value);
    }
    let Some((key, value)) = q.split_once('=') else {
        return Err(DashboardError::BadRequest(
            "search with a JSON object ({\"user_id\": 7}) or key=value (user_id=7)".into(),
        ));
    };
    let value =
        serde_json::from_str(value.trim()).unwrap_or_else(|_| serde_json::Value::String(value.trim().into()));
    Ok(serde_json::json!({ key.trim(): value }))
}

/// An id parameter.
pub(crate) fn id(pairs: &[(String, String)], key: &str) -> Result<Option<i64>, DashboardError> {
    one(pairs, key)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| DashboardError::BadRequest(format!("`{key}` must be a job id, not `{v}`")))
        })
        .transpose()
}

/// Every value of a repeated key, as ids.
pub(crate) fn ids(pairs: &[(String, String)], key: &str) -> Result<Vec<i64>, DashboardError> {
    pairs
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| {
            v.parse::<i64>().map_err(|_| DashboardError::BadRequest(format!("`{v}` is not a job id")))
        })
        .collect()
}

/// A single value.
pub(crate) fn value<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    one(pairs, key)
}

/// The filter back as a query string (for links and hidden fields).
pub(crate) fn query_string(filter: &JobFilter) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for state in &filter.states {
        s.append_pair("state", state.as_str());
    }
    for (k, v) in [("queue", &filter.queue), ("kind", &filter.kind), ("tag", &filter.tag)] {
        if let Some(v) = v {
            s.append_pair(k, v);
        }
    }
    if let Some(w) = filter.workflow {
        s.append_pair("workflow", &w.to_string());
    }
    if let Some(q) = &filter.search {
        s.append_pair("q", &q.to_string());
    }
    if let Some(text) = &filter.error {
        s.append_pair("error", text);
    }
    if let Some(t) = filter.from {
        s.append_pair("from", &t.to_rfc3339());
    }
    if let Some(t) = filter.to {
        s.append_pair("to", &t.to_rfc3339());
    }
    match filter.order {
        JobOrder::NewestFirst => {}
        JobOrder::OldestFirst => {
            s.append_pair("sort", "oldest");
        }
        JobOrder::DueSoonest => {
            s.append_pair("sort", "due");
        }
        JobOrder::RecentlyFinished => {
            s.append_pair("sort", "finished");
        }
    }
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_round_trip() {
        let p =
            pairs(b"state=retryable&state=discarded&queue=mail&q=user_id%3D7&from=2026-11-01&sort=oldest");
        let f = filter(&p, true).expect("valid");
        assert_eq!(f.states, vec![JobState::Retryable, JobState::Discarded]);
        assert_eq!(f.search, Some(serde_json::json!({"user_id": 7})));
        assert_eq!(filter(&pairs(query_string(&f).as_bytes()), true).expect("again"), f);
        assert!(matches!(filter(&pairs(b"state=exploded"), true), Err(DashboardError::BadRequest(_))));
        assert!(matches!(filter(&pairs(b"from=yesterday"), true), Err(DashboardError::BadRequest(_))));
        assert!(matches!(filter(&pairs(b"sort=kind"), true), Err(DashboardError::BadRequest(_))));
        assert!(matches!(filter(&pairs(b"q=%7Bnope"), true), Err(DashboardError::BadRequest(_))));
        // Plain text looks in errors, on every driver, and round-trips as `error`.
        let text = filter(&pairs(b"q=card+declined"), false).expect("error text");
        assert_eq!(text.error.as_deref(), Some("card declined"));
        assert_eq!(filter(&pairs(query_string(&text).as_bytes()), false).expect("again"), text);
        // A driver that cannot search refuses a search, saying why, and takes the rest.
        let refused = filter(&pairs(b"q=user_id%3D7"), false).expect_err("no search");
        assert!(refused.to_string().contains("JSON containment"), "{refused}");
        assert!(filter(&pairs(b"queue=mail"), false).is_ok());
        // A workflow's members, by its id, round-trip; anything else is refused.
        let members = filter(&pairs(b"workflow=42&state=pending"), false).expect("a workflow");
        assert_eq!(members.workflow, Some(42));
        assert_eq!(filter(&pairs(query_string(&members).as_bytes()), false).expect("again"), members);
        let bad = filter(&pairs(b"workflow=flow"), false).expect_err("not an id");
        assert!(bad.to_string().contains("`workflow` must be a workflow id"), "{bad}");
    }
}
