//! A queue's settings for the whole cluster, from the queues page: its concurrency per
//! node, and its limits (at most so many running across the cluster; at most so many
//! started per second, minute, hour or day). Workers read them at their next poll.

use jobs_core::driver::{QueueSetConcurrencyParams, QueueSetLimitsParams, RateLimit, validation};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::params;

/// The rate periods the form offers, in seconds, with their names.
pub(crate) const RATE_PERIODS: [(i64, &str); 4] =
    [(1, "second"), (60, "minute"), (3600, "hour"), (86_400, "day")];

/// A rate as the page states it: "60 per minute", "5 per 90 s".
pub(crate) fn describe_rate(rate: RateLimit) -> String {
    format!("{} per {}", rate.allowed, describe_period(i64::from(rate.period_secs)))
}

/// A rate's period as the page states it: "minute", "90 s".
pub(crate) fn describe_period(secs: i64) -> String {
    match RATE_PERIODS.iter().find(|(s, _)| *s == secs) {
        Some((_, name)) => (*name).to_owned(),
        None => format!("{secs} s"),
    }
}

/// A setting stored: what the audit hook and the notice say.
pub(crate) struct Applied {
    /// The audit action (`queue.limit`, `queue.limits`).
    pub(crate) action: &'static str,
    /// The audit target: the queue and what it was set to.
    pub(crate) target: String,
    /// The notice for the next page.
    pub(crate) notice: String,
}

/// A whole number from field `key`, or `None` when it is empty.
fn number(fields: &[(String, String)], key: &str, what: &str) -> Result<Option<i64>, DashboardError> {
    params::value(fields, key)
        .map(|text| {
            text.parse::<i64>().map_err(|_| {
                DashboardError::BadRequest(format!("{what} must be a whole number, not `{text}`"))
            })
        })
        .transpose()
}

/// `POST /queues/{name}/concurrency` with `concurrency` (slots per node on every node; empty
/// for each node's own setting).
pub(crate) async fn concurrency(
    d: &Dashboard,
    name: &str,
    fields: &[(String, String)],
) -> Result<Applied, DashboardError> {
    let concurrency = match number(fields, "concurrency", "concurrency (slots per node)")? {
        None => None,
        Some(n) => {
            validation::validate_concurrency(n).map_err(|e| DashboardError::BadRequest(e.to_string()))?;
            i32::try_from(n).ok()
        }
    };
    d.config.driver.queue_set_concurrency(QueueSetConcurrencyParams { queue: name, concurrency }).await?;
    let target =
        format!("queue {name}: {}", concurrency.map_or("each node's own".to_owned(), |n| n.to_string()));
    let notice = match concurrency {
        Some(n) => format!("queue {name}: {n} at a time on every node, from each node's next poll"),
        None => format!("queue {name}: back to each node's own concurrency"),
    };
    Ok(Applied { action: "queue.limit", target, notice })
}

/// `POST /queues/{name}/limits` with `global_limit` (at most this many running across the
/// cluster), `per_key_limit` (at most this many running per partition key), `rate_allowed`
/// and `rate_period` (seconds, one of [`RATE_PERIODS`]), `per_key_rate_allowed` and
/// `per_key_rate_period` (the same, per partition key); an empty number removes that limit.
pub(crate) async fn limits(
    d: &Dashboard,
    name: &str,
    fields: &[(String, String)],
) -> Result<Applied, DashboardError> {
    let global_limit = match number(fields, "global_limit", "the global limit")? {
        None => None,
        Some(n) => {
            validation::validate_global_limit(n).map_err(|e| DashboardError::BadRequest(e.to_string()))?;
            i32::try_from(n).ok()
        }
    };
    let per_key_limit = match number(fields, "per_key_limit", "the per-key limit")? {
        None => None,
        Some(n) => {
            validation::validate_per_key_limit(n).map_err(|e| DashboardError::BadRequest(e.to_string()))?;
            i32::try_from(n).ok()
        }
    };
    let rate = rate_field(fields, "rate_allowed", "rate_period", "the rate")?;
    let per_key_rate = rate_field(fields, "per_key_rate_allowed", "per_key_rate_period", "the rate per key")?;
    let params = QueueSetLimitsParams { queue: name, global_limit, per_key_limit, rate, per_key_rate };
    d.config.driver.queue_set_limits(params).await?;
    let stated = [
        global_limit.map(|n| format!("at most {n} running across the cluster")),
        per_key_limit.map(|n| format!("at most {n} running per key")),
        rate.map(|r| format!("{} started", describe_rate(r))),
        per_key_rate.map(|r| format!("{} started per key", describe_rate(r))),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let stated = if stated.is_empty() { "no limits".to_owned() } else { stated.join(", ") };
    Ok(Applied {
        action: "queue.limits",
        target: format!("queue {name}: {stated}"),
        notice: format!("queue {name}: {stated}, from each node's next poll"),
    })
}

/// A rate from its two fields (`allowed` empty: none).
fn rate_field(
    fields: &[(String, String)],
    allowed: &str,
    period: &str,
    what: &str,
) -> Result<Option<RateLimit>, DashboardError> {
    let Some(n) = number(fields, allowed, what)? else { return Ok(None) };
    let secs = number(fields, period, &format!("{what}'s period"))?.ok_or_else(|| {
        DashboardError::BadRequest(format!("{what} needs its period: per second, minute, hour or day"))
    })?;
    validation::validate_rate_limit(n, secs).map(Some).map_err(|e| DashboardError::BadRequest(e.to_string()))
}

#[cfg(test)]
mod tests {
    use jobs_core::driver::RateLimit;

    use super::describe_rate;

    #[test]
    fn rates_read_as_people_say_them() {
        assert_eq!(describe_rate(RateLimit { allowed: 60, period_secs: 60 }), "60 per minute");
        assert_eq!(describe_rate(RateLimit { allowed: 1, period_secs: 86_400 }), "1 per day");
        assert_eq!(describe_rate(RateLimit { allowed: 5, period_secs: 90 }), "5 per 90 s");
    }
}
