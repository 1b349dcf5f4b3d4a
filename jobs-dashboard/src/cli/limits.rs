//! `jobs-dashboard limits QUEUE`: shows a queue's cluster-wide limits, or changes those
//! given (`none` removes one); the others keep their stored value.

use std::io::Write;

use clap::Args;
use jobs_core::driver::{QueueSettingsParams, RateLimit};
use jobs_core::{QueueLimits, driver_for_url, set_queue_limits};

use super::error::CliError;

/// A queue's limits to show or change.
#[derive(Debug, Args)]
pub(super) struct LimitsArgs {
    /// The queue.
    queue: String,
    /// At most this many of its jobs running at once across the cluster (`none`: no limit).
    #[arg(long, value_name = "N|none")]
    global: Option<String>,
    /// At most this many running at once per partition key (`none`: no limit).
    #[arg(long, value_name = "N|none")]
    per_key: Option<String>,
    /// At most N started per period: `100/minute`, `10/second`, `5000/hour`, `20/day`,
    /// `30/90` (seconds) (`none`: no rate).
    #[arg(long, value_name = "N/PERIOD|none")]
    rate: Option<String>,
    /// At most N started per period per partition key, written as `--rate` (`none`: no
    /// rate per key).
    #[arg(long, value_name = "N/PERIOD|none")]
    per_key_rate: Option<String>,
}

/// A count, or `none`.
fn count(option: &str, value: &str) -> Result<Option<u32>, CliError> {
    if value == "none" {
        return Ok(None);
    }
    value
        .parse::<u32>()
        .map(Some)
        .map_err(|_| CliError::Invalid(format!("--{option} takes a whole number or `none`, not `{value}`")))
}

/// `N/PERIOD`, or `none` (for `--option`).
fn rate(option: &str, value: &str) -> Result<Option<RateLimit>, CliError> {
    if value == "none" {
        return Ok(None);
    }
    let bad =
        || CliError::Invalid(format!("--{option} takes N/PERIOD (e.g. 100/minute) or `none`, not `{value}`"));
    let (allowed, period) = value.split_once('/').ok_or_else(bad)?;
    let allowed: u32 = allowed.trim().parse().map_err(|_| bad())?;
    let period_secs = match period.trim() {
        "second" | "s" => 1,
        "minute" | "min" => 60,
        "hour" | "h" => 3_600,
        "day" | "d" => 86_400,
        secs => secs.trim_end_matches('s').parse().map_err(|_| bad())?,
    };
    Ok(Some(RateLimit { allowed, period_secs }))
}

/// Shows the queue's limits; with any option, first changes those.
pub(super) async fn limits(url: &str, args: LimitsArgs, out: &mut impl Write) -> Result<(), CliError> {
    let driver = driver_for_url(url, 1)?;
    let read = |driver: std::sync::Arc<dyn jobs_core::driver::Driver>, queue: String| async move {
        let stored = driver
            .queue_settings(QueueSettingsParams { queue: Some(&queue) })
            .await
            .map_err(jobs_core::Error::from)?;
        Ok::<_, CliError>(stored.into_iter().next())
    };
    let stored = read(driver.clone(), args.queue.clone()).await?;
    if args.global.is_some() || args.per_key.is_some() || args.rate.is_some() || args.per_key_rate.is_some() {
        let to_u32 = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok());
        let mut limits = QueueLimits {
            global_limit: to_u32(stored.as_ref().and_then(|s| s.global_limit)),
            per_key_limit: to_u32(stored.as_ref().and_then(|s| s.per_key_limit)),
            rate: stored.as_ref().and_then(|s| s.rate()),
            per_key_rate: stored.as_ref().and_then(|s| s.per_key_rate()),
        };
        if let Some(v) = &args.global {
            limits.global_limit = count("global", v)?;
        }
        if let Some(v) = &args.per_key {
            limits.per_key_limit = count("per-key", v)?;
        }
        if let Some(v) = &args.rate {
            limits.rate = rate("rate", v)?;
        }
        if let Some(v) = &args.per_key_rate {
            limits.per_key_rate = rate("per-key-rate", v)?;
        }
        set_queue_limits(driver.clone(), &args.queue, limits).await?;
    }
    let stored = read(driver, args.queue.clone()).await?;
    let shown = |n: Option<i64>| n.map_or("none".to_owned(), |n| n.to_string());
    writeln!(out, "queue {}", args.queue)?;
    writeln!(out, "  global limit: {}", shown(stored.as_ref().and_then(|s| s.global_limit)))?;
    writeln!(out, "  per-key limit: {}", shown(stored.as_ref().and_then(|s| s.per_key_limit)))?;
    match stored.as_ref().and_then(|s| s.rate()) {
        Some(r) => writeln!(out, "  rate: {} per {} s", r.allowed, r.period_secs)?,
        None => writeln!(out, "  rate: none")?,
    }
    match stored.as_ref().and_then(|s| s.per_key_rate()) {
        Some(r) => writeln!(out, "  rate per key: {} per {} s", r.allowed, r.period_secs)?,
        None => writeln!(out, "  rate per key: none")?,
    }
    writeln!(
        out,
        "(workers read changes at their next poll; limits a worker declares apply where none is stored)"
    )?;
    Ok(())
}
