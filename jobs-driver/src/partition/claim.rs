//! A claim on a queue with a per-key limit, over a backend's statements.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use chrono::{DateTime, Utc};

use super::key::partition_key_of;
use super::rate::{KeyRate, UNKEYED_RATE_KEY, rate_key};
use super::shares::{Share, shares};
use super::turn::PartitionTurn;
use crate::error::Result;
use crate::job::ClaimedJob;
use crate::queue_limits::{RateLimit, RateWindow};

/// The most per-key rounds a claim makes when keys turn out to hold fewer jobs than their
/// share (each round is one more statement).
const MAX_ROUNDS: usize = 8;

/// What a backend does for a claim on a queue with a per-key limit, inside the claim's
/// transaction (which holds the queue's row). [`claim_by_key`] calls these.
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

    /// The stored rate usage of these keys (texts as [`rate_key`] makes them; keys
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

/// The limits a claim deals over the keys with: running at once per key, started per
/// period per key (at least one is set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyLimits {
    /// At most this many running at once per key.
    pub per_key: Option<i64>,
    /// At most this many started per period per key.
    pub rate: Option<RateLimit>,
}

/// The room a key without a per-key concurrency limit has (more than any claim takes).
const NO_LIMIT: i64 = 1 << 40;

/// A claim of up to `allowed` jobs on a queue with limits per key, the queue's jobs
/// running now counted in `running` by key (see the module docs). Returns the claimed
/// jobs and the turn to store.
pub async fn claim_by_key<O: KeyedClaimOps>(
    ops: &mut O,
    limits: KeyLimits,
    running: &HashMap<Option<String>, i64>,
    allowed: i64,
    turn: &PartitionTurn,
    now: DateTime<Utc>,
) -> Result<(Vec<ClaimedJob>, PartitionTurn)> {
    let mut next = turn.clone();
    let per_key = limits.per_key.unwrap_or(NO_LIMIT);
    if allowed <= 0 || per_key <= 0 {
        return Ok((Vec::new(), next));
    }
    // Enough keys to fill the allowance even if every key at its limit, or with its rate
    // used up, is among them.
    let full = i64::try_from(running.values().filter(|n| **n >= per_key).count()).unwrap_or(i64::MAX);
    let blocked = match limits.rate {
        Some(_) => ops.rate_blocked(now).await?,
        None => 0,
    };
    let wanted = allowed.saturating_add(full).saturating_add(blocked);
    let unkeyed = turn.unkeyed_due(now);
    // The keys in turn order: what is left of the round under way (after the turn, up to
    // the round's end), then, if that is short, a new round (the unkeyed group, the keys
    // up to the turn, the keys after the old round's end). The parts never overlap; the
    // new round's start is at `split`.
    let old_end = turn.round_end.clone();
    let keyed = |order: &[Option<String>]| i64::try_from(order.iter().flatten().count()).unwrap_or(i64::MAX);
    let mut order: Vec<Option<String>> = Vec::new();
    let (mut began, mut new_end) = (false, None);
    let split = match turn.after.as_deref() {
        None => {
            (began, new_end) = (true, begin_round(ops, unkeyed, &mut order).await?);
            if let Some(end) = new_end.as_deref() {
                order.extend(ops.keys(None, Some(end), wanted).await?.into_iter().map(Some));
            }
            0
        }
        Some(after) => {
            if let Some(end) = old_end.as_deref() {
                order.extend(ops.keys(Some(after), Some(end), wanted).await?.into_iter().map(Some));
            }
            let split = order.len();
            if keyed(&order) < wanted {
                (began, new_end) = (true, begin_round(ops, unkeyed, &mut order).await?);
                if let Some(end) = new_end.as_deref() {
                    let short = wanted - keyed(&order);
                    if !after.is_empty() && short > 0 {
                        order.extend(ops.keys(None, Some(after), short).await?.into_iter().map(Some));
                    }
                    let short = wanted - keyed(&order);
                    if short > 0 {
                        let from = old_end.as_deref().unwrap_or(after);
                        order.extend(ops.keys(Some(from), Some(end), short).await?.into_iter().map(Some));
                    }
                }
            }
            split
        }
    };
    // Each key once (the parts never overlap: this only guards the dealing).
    let mut seen = HashSet::new();
    order.retain(|k| seen.insert(k.clone()));
    let turn_order = order.clone();
    let mut served: HashSet<Option<String>> = HashSet::new();
    let mut running = running.clone();
    // A key's rate left counts as room taken: what it may still start bounds its share.
    let windows = match limits.rate {
        Some(rate) => stored_windows(ops, rate, &order, &mut running, per_key, now).await?,
        None => HashMap::new(),
    };
    let mut claimed: Vec<ClaimedJob> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let left = allowed - i64::try_from(claimed.len()).unwrap_or(i64::MAX);
        let dealt = shares(per_key, &running, &order, left);
        if dealt.is_empty() {
            break;
        }
        let jobs = ops.claim(&dealt).await?;
        let mut got: HashMap<Option<String>, i64> = HashMap::new();
        for job in &jobs {
            *got.entry(partition_key_of(&job.meta)).or_default() += 1;
        }
        served.extend(got.keys().cloned());
        if dealt.iter().any(|s| s.key.is_none()) {
            next.unkeyed_found(got.contains_key(&None), now);
        }
        // Keys that gave less than their share have no more: only the others go on.
        order.retain(|k| {
            let share = dealt.iter().find(|s| &s.key == k).map_or(0, |s| s.take);
            share == 0 || got.get(k).copied().unwrap_or(0) >= share
        });
        for (key, n) in got {
            *running.entry(key).or_default() += n;
        }
        let short = jobs.len() < usize::try_from(dealt.iter().map(|s| s.take).sum::<i64>()).unwrap_or(0);
        claimed.extend(jobs);
        if !short {
            break;
        }
    }
    if let Some(rate) = limits.rate {
        store_rates(ops, rate, &claimed, &windows, now).await?;
    }
    // The turn stops at the furthest key that got a job (in turn order). When none got
    // one (every listed key at its limit, or its jobs held by others), it moves past the
    // listed keys all the same: the next claim walks on instead of over the same ones. The
    // new round has begun only if the turn stopped in it.
    let last = match turn_order.iter().rposition(|k| served.contains(k)) {
        Some(i) => Some(i),
        None => turn_order.iter().rposition(Option::is_some),
    };
    match last {
        Some(i) => {
            next.after = Some(turn_order[i].clone().unwrap_or_default());
            next.round_end = if i >= split { new_end } else { old_end };
        }
        // No key listed: a round that began ends where it found them (none).
        None if began => next.round_end = new_end,
        None => {}
    }
    Ok((claimed, next))
}

/// A round begins: the unkeyed group first when it is due; returns where the round ends
/// (the greatest key waiting now).
async fn begin_round<O: KeyedClaimOps>(
    ops: &mut O,
    unkeyed: bool,
    order: &mut Vec<Option<String>>,
) -> Result<Option<String>> {
    if unkeyed {
        order.push(None);
    }
    ops.last_key().await
}

/// The listed keys' stored rate usage, by key; each key's rate left lowers its room in
/// `running` (as if it ran what it may no longer start).
async fn stored_windows<O: KeyedClaimOps>(
    ops: &mut O,
    rate: RateLimit,
    order: &[Option<String>],
    running: &mut HashMap<Option<String>, i64>,
    per_key: i64,
    now: DateTime<Utc>,
) -> Result<HashMap<Option<String>, RateWindow>> {
    let texts: Vec<String> = order.iter().map(|k| rate_key(k.as_deref()).to_owned()).collect();
    let stored = if texts.is_empty() { Vec::new() } else { ops.key_rates(&texts).await? };
    let windows: HashMap<Option<String>, RateWindow> =
        stored.into_iter().map(|r| ((r.key != UNKEYED_RATE_KEY).then_some(r.key), r.window)).collect();
    for key in order {
        let left = rate.left(windows.get(key), now);
        let taken = running.entry(key.clone()).or_default();
        *taken = (*taken).max(per_key.saturating_sub(left));
    }
    Ok(windows)
}

/// Stores the usage of the keys that started jobs, and forgets the windows that count
/// nothing any more.
async fn store_rates<O: KeyedClaimOps>(
    ops: &mut O,
    rate: RateLimit,
    claimed: &[ClaimedJob],
    windows: &HashMap<Option<String>, RateWindow>,
    now: DateTime<Utc>,
) -> Result<()> {
    let mut started: HashMap<Option<String>, i64> = HashMap::new();
    for job in claimed {
        *started.entry(partition_key_of(&job.meta)).or_default() += 1;
    }
    let mut rates: Vec<KeyRate> = started
        .into_iter()
        .map(|(key, n)| {
            let window = rate.after(windows.get(&key), n, now);
            let blocked_until = rate.blocked_until(&window);
            KeyRate { key: rate_key(key.as_deref()).to_owned(), window, blocked_until }
        })
        .collect();
    rates.sort_by(|a, b| a.key.cmp(&b.key));
    let stale_before = now - (rate.forgotten_after(now) - now);
    ops.store_key_rates(&rates, stale_before).await
}
