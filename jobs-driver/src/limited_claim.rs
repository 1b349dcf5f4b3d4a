//! A claim on a queue with cluster-wide limits, written once for every backend: inside
//! one transaction, lock the queue's row and read its limits and usage, count what runs
//! (per key when the queue has a limit per key; the claiming node's runs that ended and
//! wait for their outcome's write run nothing and are left out), claim what the limits
//! allow (in turn over the keys, [`crate::partition`]), and store the rate's usage and
//! the keys' turn.
//! A backend supplies the statements ([`LimitedClaimOps`]); [`claim_limited`] decides.

use std::collections::HashMap;
use std::future::Future;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::job::ClaimedJob;
use crate::partition::{KeyLimits, KeyedClaimOps, PartitionTurn, claim_by_key};
use crate::queue_limits::{ClaimLimits, DeclaredLimits, RateLimit, RateWindow};

/// A queue's row as a limited claim reads it, under its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLimits {
    /// The settings' `global_limit`.
    pub global_limit: Option<i64>,
    /// The settings' `per_key_limit`.
    pub per_key_limit: Option<i64>,
    /// The settings' `rate_allowed`.
    pub rate_allowed: Option<i64>,
    /// The settings' `rate_period_secs`.
    pub rate_period_secs: Option<i64>,
    /// The settings' `per_key_rate_allowed`.
    pub per_key_rate_allowed: Option<i64>,
    /// The settings' `per_key_rate_period_secs`.
    pub per_key_rate_period_secs: Option<i64>,
    /// `rate_window`: where the rate's newest slice began.
    pub rate_window: Option<DateTime<Utc>>,
    /// `rate_counts`: the rate's starts per slice (JSON text).
    pub rate_counts: Option<String>,
    /// `partition_turn`: where the turn over the keys stands (JSON text).
    pub partition_turn: Option<String>,
    /// The claim's time (the given one, or the database's clock).
    pub now: DateTime<Utc>,
}

/// The statements of a limited claim, run by a backend inside the claim's transaction.
pub trait LimitedClaimOps: KeyedClaimOps {
    /// Locks the queue's row (until the transaction ends) and reads it; `None` when the
    /// queue has no row.
    fn lock_limits(&mut self) -> impl Future<Output = Result<Option<StoredLimits>>> + Send;

    /// Creates the queue's row with nothing set, unless it exists (for limits a worker
    /// declares, whose claims need a row to take turns on).
    fn create_row(&mut self) -> impl Future<Output = Result<()>> + Send;

    /// The queue's running jobs, counted per partition key when `by_key` (`None`: the
    /// unkeyed ones), else in one row keyed `None`, leaving out the claiming node's runs
    /// that ended ([`JobClaimParams::ended`](crate::JobClaimParams::ended)). Read after
    /// the lock, so that it sees every claim committed before.
    fn running(&mut self, by_key: bool) -> impl Future<Output = Result<Vec<(Option<String>, i64)>>> + Send;

    /// The ordinary claim, of at most `limit` jobs.
    fn claim_plain(&mut self, limit: usize) -> impl Future<Output = Result<Vec<ClaimedJob>>> + Send;

    /// Stores the rate's usage and the keys' turn (each when given).
    fn store(
        &mut self,
        usage: Option<&RateWindow>,
        turn: Option<&PartitionTurn>,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// Claims up to `limit` jobs under the queue's stored limits, or those `declared` where
/// none is stored (see the module docs). A queue without any limit gets the plain claim.
pub async fn claim_limited<O: LimitedClaimOps>(
    ops: &mut O,
    limit: usize,
    declared: &DeclaredLimits,
) -> Result<Vec<ClaimedJob>> {
    let mut stored = ops.lock_limits().await?;
    if stored.is_none() && declared.any() {
        ops.create_row().await?;
        stored = ops.lock_limits().await?;
    }
    let Some(stored) = stored else { return ops.claim_plain(limit).await };
    let window = RateWindow::decode(stored.rate_window, stored.rate_counts.as_deref());
    let per_key_rate = match (stored.per_key_rate_allowed, stored.per_key_rate_period_secs) {
        (Some(allowed), Some(period)) => RateLimit::new(allowed, period),
        _ => None,
    };
    let limits = ClaimLimits {
        per_key_rate,
        ..ClaimLimits::stored(
            stored.global_limit,
            stored.per_key_limit,
            stored.rate_allowed,
            stored.rate_period_secs,
            window,
        )
    }
    .or_declared(declared);
    if !limits.any() {
        return ops.claim_plain(limit).await;
    }
    let running = if limits.global_limit.is_some() || limits.per_key.is_some() {
        ops.running(limits.keyed()).await?
    } else {
        Vec::new()
    };
    let total: i64 = running.iter().map(|(_, n)| n).sum();
    let now = stored.now;
    let allowed = limits.allowance(i64::try_from(limit).unwrap_or(i64::MAX), total, now);
    if allowed == 0 {
        return Ok(Vec::new());
    }
    let (jobs, turn) = if limits.keyed() {
        let running: HashMap<Option<String>, i64> = running.into_iter().collect();
        let turn = PartitionTurn::decode(stored.partition_turn.as_deref());
        let by_key = KeyLimits { per_key: limits.per_key, rate: limits.per_key_rate };
        let (jobs, next) = claim_by_key(ops, by_key, &running, allowed, &turn, now).await?;
        (jobs, (next != turn).then_some(next))
    } else {
        (ops.claim_plain(usize::try_from(allowed).unwrap_or(limit)).await?, None)
    };
    let usage = limits.after_claim(i64::try_from(jobs.len()).unwrap_or(i64::MAX), now);
    if usage.is_some() || turn.is_some() {
        ops.store(usage.as_ref(), turn.as_ref()).await?;
    }
    Ok(jobs)
}

/// The runs of [`JobClaimParams::ended`](crate::JobClaimParams::ended) as JSON text,
/// `[[job, attempt], ...]`, for backends that take a list as one parameter.
///
/// ```
/// assert_eq!(jobs_driver::limited_claim::ended_runs_json(&[(7, 1), (9, 2)]), "[[7,1],[9,2]]");
/// assert_eq!(jobs_driver::limited_claim::ended_runs_json(&[]), "[]");
/// ```
pub fn ended_runs_json(ended: &[(i64, i32)]) -> String {
    let mut out = String::with_capacity(2 + ended.len() * 16);
    out.push('[');
    for (i, (id, attempt)) in ended.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!("[{id},{attempt}]"));
    }
    out.push(']');
    out
}

/// Runs a future whose every step is ready at once (a synchronous backend's operations
/// wrapped in [`LimitedClaimOps`]) to its end, on this thread. A future that waits is a
/// bug in such a wrapper and gives [`DriverError::Runtime`](crate::DriverError::Runtime).
pub fn run_ready<T>(future: impl Future<Output = Result<T>>) -> Result<T> {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => {
            Err(crate::DriverError::Runtime("a synchronous claim's step did not complete at once".into()))
        }
    }
}
