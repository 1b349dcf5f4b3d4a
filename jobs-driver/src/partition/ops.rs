//! What a backend supplies for a claim that deals over the keys.

use std::future::Future;

use chrono::{DateTime, Utc};

use super::rate::KeyRate;
use super::shares::Share;
use crate::error::Result;
use crate::job::ClaimedJob;

/// What a backend does for a claim on a queue with a per-key limit, inside the claim's
/// transaction (which holds the queue's row). [`claim_by_key`](super::claim_by_key) calls these.
pub trait KeyedClaimOps: Send {
    /// Up to `n` distinct keys of the queue's available keyed jobs, in key order: those
    /// after `after` (all when `None`), and not after `until` when given.
    fn keys(
        &mut self,
        after: Option<&str>,
        until: Option<&str>,
        n: i64,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// The greatest key of the queue's available keyed jobs, if any.
    fn last_key(&mut self) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Claims the shares' jobs: of each key its `take` first available jobs, in the
    /// usual order (priority, due time, id), skipping rows others hold.
    fn claim(&mut self, shares: &[Share]) -> impl Future<Output = Result<Vec<ClaimedJob>>> + Send;

    /// How many of the queue's keys have used up their rate at `now` (their stored
    /// `blocked_until` is after it). Asked only under a per-key rate.
    fn rate_blocked(&mut self, now: DateTime<Utc>) -> impl Future<Output = Result<i64>> + Send;

    /// The stored rate usage of these keys (texts as [`rate_key`](super::rate_key) makes them; keys
    /// without a row are left out). Asked only under a per-key rate.
    fn key_rates(&mut self, keys: &[String]) -> impl Future<Output = Result<Vec<KeyRate>>> + Send;

    /// Stores these keys' usage (a row per key, written over), and forgets the rows of
    /// the queue whose window began before `stale_before` (they count no start any more).
    fn store_key_rates(
        &mut self,
        rates: &[KeyRate],
        stale_before: DateTime<Utc>,
    ) -> impl Future<Output = Result<()>> + Send;
}
