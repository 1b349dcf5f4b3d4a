//! A claim on a queue with a per-key limit, over a backend's statements.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::key::partition_key_of;
use super::ops::KeyedClaimOps;
use super::rate_usage::KeyRates;
use super::shares::shares;
use super::turn::PartitionTurn;
use super::walk::{Walk, walk};
use crate::error::Result;
use crate::job::ClaimedJob;
use crate::queue_limits::RateLimit;

/// The most per-key rounds a claim makes when keys turn out to hold fewer jobs than their
/// share (each round is one more statement).
const MAX_ROUNDS: usize = 8;

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
    // The walk lists keys until `allowed` of them have room. Keys at their limit are
    // mostly behind the turn (they were served last), so it first lists `allowed` (and one
    // more per key whose rate is used up); when keys without room took places in it, it
    // walks again as far as every key at its limit or used up could need, and, for a key
    // whose rate turns out used up though its row did not say so (the rate was lowered
    // since, or a node declares another), one further each (and stores it blocked, so that
    // the next claim counts it). Such keys can double the walk each time: the last walk
    // before the cap lists every key. The rates read are always the final walk's.
    let full = i64::try_from(running.values().filter(|n| **n >= per_key).count()).unwrap_or(i64::MAX);
    let blocked = match limits.rate {
        Some(_) => ops.rate_blocked(now).await?,
        None => 0,
    };
    let most = allowed.saturating_add(full).saturating_add(blocked);
    let mut wanted = allowed.saturating_add(blocked);
    let unkeyed = turn.unkeyed_due(now);
    let mut walked = walk(ops, turn, unkeyed, wanted).await?;
    let mut rates = KeyRates::default();
    for round in 1..=MAX_ROUNDS {
        if let Some(rate) = limits.rate {
            rates = KeyRates::read(ops, rate, &walked.order, now).await?;
        }
        let stuck = walked.order.iter().filter(|k| k.is_some()).filter(|k| {
            running.get(*k).is_some_and(|n| *n >= per_key)
                || limits.rate.is_some_and(|r| rates.used_up(r, k, now))
        });
        let stuck = i64::try_from(stuck.count()).unwrap_or(i64::MAX);
        let listed = walked.keyed();
        if listed < wanted || listed - stuck >= allowed || round == MAX_ROUNDS {
            break;
        }
        let unforeseen = i64::try_from(rates.unforeseen.len()).unwrap_or(i64::MAX);
        wanted = if round + 1 == MAX_ROUNDS {
            i64::MAX
        } else {
            most.saturating_add(unforeseen).max(wanted.saturating_add(stuck))
        };
        walked = walk(ops, turn, unkeyed, wanted).await?;
    }
    let Walk { mut order, split, began, new_end, old_end } = walked;
    let turn_order = order.clone();
    let mut served: HashSet<Option<String>> = HashSet::new();
    let mut running = running.clone();
    // A key's rate left counts as room taken: what it may still start bounds its share.
    if let Some(rate) = limits.rate {
        rates.lower_room(rate, &order, &mut running, per_key, now);
    }
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
        rates.store(ops, rate, &claimed, now).await?;
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
