//! A claim on a queue with a per-key limit, over a backend's statements.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use chrono::{DateTime, Utc};

use super::key::partition_key_of;
use super::shares::{Share, shares};
use super::turn::PartitionTurn;
use crate::error::Result;
use crate::job::ClaimedJob;

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
}

/// A claim of up to `allowed` jobs on a queue with `per_key` as its per-key limit, the
/// queue's jobs running now counted in `running` by key (see the module docs). Returns
/// the claimed jobs and the turn to store.
pub async fn claim_by_key<O: KeyedClaimOps>(
    ops: &mut O,
    per_key: i64,
    running: &HashMap<Option<String>, i64>,
    allowed: i64,
    turn: &PartitionTurn,
    now: DateTime<Utc>,
) -> Result<(Vec<ClaimedJob>, PartitionTurn)> {
    let mut next = turn.clone();
    if allowed <= 0 || per_key <= 0 {
        return Ok((Vec::new(), next));
    }
    // Enough keys to fill the allowance even if every key at its limit is among them.
    let full = i64::try_from(running.values().filter(|n| **n >= per_key).count()).unwrap_or(i64::MAX);
    let wanted = allowed.saturating_add(full);
    let unkeyed = turn.unkeyed_due(now);
    let mut order: Vec<Option<String>> = Vec::new();
    // Where the round under way ends; a round that starts here ends at the greatest key.
    let mut round_end = turn.round_end.clone();
    match turn.after.as_deref() {
        None => {
            round_end = begin_round(ops, unkeyed, &mut order).await?;
            if let Some(end) = round_end.as_deref() {
                order.extend(ops.keys(None, Some(end), wanted).await?.into_iter().map(Some));
            }
        }
        Some(after) => {
            let later = match round_end.as_deref() {
                Some(end) => ops.keys(Some(after), Some(end), wanted).await?,
                None => Vec::new(),
            };
            let short = wanted - i64::try_from(later.len()).unwrap_or(i64::MAX);
            order.extend(later.into_iter().map(Some));
            if short > 0 {
                // The round ends: the next one starts with the unkeyed group, then the keys
                // not listed yet (each key at most once per claim): up to where this claim
                // began; or, when it began at the start, those of the new round if the last
                // round had none.
                let listed_to = round_end.take();
                round_end = begin_round(ops, unkeyed, &mut order).await?;
                let until = match (after.is_empty(), &listed_to) {
                    (false, _) => Some(after),
                    (true, None) => round_end.as_deref(),
                    (true, Some(_)) => None,
                };
                if let Some(until) = until.filter(|_| round_end.is_some()) {
                    order.extend(ops.keys(None, Some(until), short).await?.into_iter().map(Some));
                }
                // Short still: the new round's keys after where this claim began (new ones,
                // or those the last round left out), for no key with room to wait a claim.
                let listed = i64::try_from(order.iter().filter(|k| k.is_some()).count()).unwrap_or(i64::MAX);
                if let Some(end) = round_end.as_deref().filter(|_| !after.is_empty() && listed < wanted) {
                    let more = ops.keys(Some(after), Some(end), wanted - listed).await?;
                    order.extend(more.into_iter().map(Some));
                }
            }
        }
    }
    next.round_end = round_end;
    // Each key once (the listings are disjoint; a key listed twice would be dealt twice).
    let mut seen = HashSet::new();
    order.retain(|k| seen.insert(k.clone()));
    let turn_order = order.clone();
    let mut served: HashSet<Option<String>> = HashSet::new();
    let mut running = running.clone();
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
    // The turn stops at the furthest key that got a job (in turn order). When none got
    // one (every listed key at its limit, or its jobs held by others), it moves past the
    // listed keys all the same: the next claim walks on instead of over the same ones.
    let last = match turn_order.iter().rev().find(|k| served.contains(*k)) {
        Some(last) => Some(last),
        None => turn_order.iter().rev().find(|k| k.is_some()),
    };
    if let Some(last) = last {
        next.after = Some(last.clone().unwrap_or_default());
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
