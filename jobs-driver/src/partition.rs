//! Limits per partition key: at most N of a queue's jobs running at once for each key
//! (a customer, a tenant), across the cluster, keys served in turn.
//!
//! **The key.** A job's key is its metadata's [`PARTITION_META_KEY`] entry (`_partition_key`:
//! a name of the engine's, apart from the application's own entries), a string that the
//! enqueue API writes from an argument field, another metadata field or an explicit key
//! (checked by [`validate_partition_key`](crate::validation::validate_partition_key)). A job without one is *unkeyed*; in a queue with a per-key limit the unkeyed jobs
//! are one group, limited like a key.
//!
//! **The claim.** A claim on such a queue runs under the queue's row lock, like every
//! limited claim ([`ClaimLimits`](crate::ClaimLimits)). It counts the queue's running
//! jobs per key, lists the keys with available jobs in key order starting after the
//! last key served (the queue's stored [`PartitionTurn`]; each listed key costs one index
//! probe, and the walk stops after the claim's size plus the keys at their limit, however
//! many keys wait), gives each key in turn one job until the
//! claim's allowance is spent or every key is at its limit ([`shares`]), claims those
//! jobs, and stores where the turn stopped. One hot key therefore gets one job per turn
//! like any other: it cannot starve the others. Within a key, jobs go in their usual
//! order (priority, due time, id); across keys, the turn decides.
//!
//! **The unkeyed group** takes its turn at the start of each round. Only the keyed jobs
//! are indexed by key (plain jobs pay nothing for this feature), so on backends with
//! partial indexes finding unkeyed jobs reads the queue's line; when that found none, the
//! group is skipped for [`UNKEYED_RECHECK_MS`].
//!
//! ```
//! use jobs_driver::partition::{Share, shares};
//!
//! // Limit 2 per key; key "a" already runs 2, "b" runs 1; claim up to 4.
//! let running = [(Some("a".to_owned()), 2), (Some("b".to_owned()), 1)].into_iter().collect();
//! let keys = [Some("a".to_owned()), Some("b".to_owned()), Some("c".to_owned())];
//! let got = shares(2, &running, &keys, 4);
//! assert_eq!(got, vec![Share { key: Some("b".into()), take: 1 }, Share { key: Some("c".into()), take: 2 }]);
//! ```

use std::collections::HashMap;
use std::future::Future;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::job::ClaimedJob;

pub use crate::validation::{MAX_PARTITION_KEY_CHARS, PARTITION_META_KEY};

/// How long the unkeyed group is skipped after a claim found it empty.
pub const UNKEYED_RECHECK_MS: i64 = 1_000;

/// The most per-key rounds a claim makes when keys turn out to hold fewer jobs than their
/// share (each round is one more statement).
const MAX_ROUNDS: usize = 8;

/// Where a queue's turn over its keys stands, stored with the queue (as JSON text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionTurn {
    /// The last key served: the next claim starts after it. `None`: a round starts, with
    /// the unkeyed group; `Some("")`: the unkeyed group was served, the keys come next.
    pub after: Option<String>,
    /// When a claim last found the unkeyed group empty.
    pub unkeyed_empty_at: Option<DateTime<Utc>>,
}

impl PartitionTurn {
    /// The turn as stored (`None` or unreadable text: a round starts).
    pub fn decode(stored: Option<&str>) -> PartitionTurn {
        let Some(value) = stored.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
            return PartitionTurn::default();
        };
        let after = value.get("after").and_then(|a| a.as_str()).map(str::to_owned);
        let unkeyed_empty_at = value
            .get("unkeyed_empty_at")
            .and_then(|t| t.as_i64())
            .and_then(DateTime::<Utc>::from_timestamp_millis);
        PartitionTurn { after, unkeyed_empty_at }
    }

    /// The turn as stored: a JSON object.
    pub fn encode(&self) -> String {
        serde_json::json!({
            "after": self.after,
            "unkeyed_empty_at": self.unkeyed_empty_at.map(|t| t.timestamp_millis()),
        })
        .to_string()
    }

    fn unkeyed_due(&self, now: DateTime<Utc>) -> bool {
        self.unkeyed_empty_at.is_none_or(|at| (now - at).num_milliseconds() >= UNKEYED_RECHECK_MS || now < at)
    }
}

/// A part of a claim: up to `take` available jobs of `key` (`None`: the unkeyed ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// The key.
    pub key: Option<String>,
    /// The most jobs to claim of it.
    pub take: i64,
}

/// Deals `allowed` jobs out over `keys` (in turn order), one per key per round, each key
/// up to `per_key` minus what it runs: the shares of a fair claim, in turn order (by
/// where each key first got one). Keys at their limit get nothing.
pub fn shares(
    per_key: i64,
    running: &HashMap<Option<String>, i64>,
    keys: &[Option<String>],
    allowed: i64,
) -> Vec<Share> {
    let room: Vec<i64> =
        keys.iter().map(|k| (per_key - running.get(k).copied().unwrap_or(0)).max(0)).collect();
    let mut given = vec![0_i64; keys.len()];
    let mut left = allowed.max(0);
    while left > 0 {
        let mut dealt = false;
        for (i, room) in room.iter().enumerate() {
            if left == 0 {
                break;
            }
            if given[i] < *room {
                given[i] += 1;
                left -= 1;
                dealt = true;
            }
        }
        if !dealt {
            break;
        }
    }
    keys.iter()
        .zip(given)
        .filter(|(_, take)| *take > 0)
        .map(|(key, take)| Share { key: key.clone(), take })
        .collect()
}

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
    match turn.after.as_deref() {
        None => {
            if unkeyed {
                order.push(None);
            }
            order.extend(ops.keys(None, None, wanted).await?.into_iter().map(Some));
        }
        Some(after) => {
            let later = ops.keys(Some(after), None, wanted).await?;
            let short = wanted - i64::try_from(later.len()).unwrap_or(i64::MAX);
            order.extend(later.into_iter().map(Some));
            if short > 0 {
                // The round wraps: the unkeyed group, then the keys up to where it began.
                if unkeyed {
                    order.push(None);
                }
                let until = if after.is_empty() { None } else { Some(after) };
                if until.is_some() {
                    order.extend(ops.keys(None, until, short).await?.into_iter().map(Some));
                }
            }
        }
    }
    let turn_order = order.clone();
    let mut served: std::collections::HashSet<Option<String>> = std::collections::HashSet::new();
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
        if let Some(share) = dealt.iter().find(|s| s.key.is_none()) {
            let found = got.get(&None).copied().unwrap_or(0);
            next.unkeyed_empty_at = if found == 0 && share.take > 0 { Some(now) } else { None };
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

/// A job's partition key, read from its metadata's JSON text (`None`: unkeyed). As the
/// databases read it: the entry's string.
pub fn partition_key_of(meta: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(meta).ok()?;
    value.get(PARTITION_META_KEY)?.as_str().map(str::to_owned)
}

/// The key a JSON value makes: a string as it is, a number or boolean as written; `None`
/// for null, an empty string, an array or an object.
pub fn key_text(value: &serde_json::Value) -> Option<String> {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{PartitionTurn, Share, key_text, partition_key_of, shares};

    fn keys(names: &[&str]) -> Vec<Option<String>> {
        names.iter().map(|k| Some((*k).to_owned())).collect()
    }

    #[test]
    fn shares_go_round_the_keys_one_at_a_time() {
        let none = HashMap::new();
        let got = shares(3, &none, &keys(&["a", "b"]), 5);
        assert_eq!(
            got,
            vec![Share { key: Some("a".into()), take: 3 }, Share { key: Some("b".into()), take: 2 }]
        );
        let many: Vec<Option<String>> = (0..100).map(|i| Some(format!("k{i:03}"))).collect();
        let got = shares(1, &none, &many, 10);
        assert_eq!(got.len(), 10, "ten keys get one each");
        assert_eq!(got[9].key.as_deref(), Some("k009"));
        assert!(shares(1, &none, &many, 0).is_empty());
        assert!(shares(1, &none, &[], 5).is_empty());
    }

    #[test]
    fn keys_at_their_limit_get_nothing() {
        let running: HashMap<Option<String>, i64> =
            [(Some("hot".to_owned()), 1), (None, 1)].into_iter().collect();
        let got = shares(1, &running, &[None, Some("hot".into()), Some("cold".into())], 10);
        assert_eq!(got, vec![Share { key: Some("cold".into()), take: 1 }]);
        // A limit lowered below what runs gives nothing, never a negative share.
        let got = shares(0, &running, &keys(&["cold"]), 10);
        assert!(got.is_empty());
    }

    #[test]
    fn the_turn_reads_back_and_bad_text_starts_a_round() {
        let turn = PartitionTurn {
            after: Some("acme".into()),
            unkeyed_empty_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_123),
        };
        assert_eq!(PartitionTurn::decode(Some(&turn.encode())), turn);
        assert_eq!(PartitionTurn::decode(Some("garbage")), PartitionTurn::default());
        assert_eq!(PartitionTurn::decode(None), PartitionTurn::default());
    }

    #[test]
    fn keys_come_from_strings_numbers_and_booleans() {
        assert_eq!(key_text(&serde_json::json!("acme")), Some("acme".into()));
        assert_eq!(key_text(&serde_json::json!(42)), Some("42".into()));
        assert_eq!(key_text(&serde_json::json!(true)), Some("true".into()));
        assert_eq!(key_text(&serde_json::json!("")), None);
        assert_eq!(key_text(&serde_json::json!(null)), None);
        assert_eq!(key_text(&serde_json::json!({"a": 1})), None);
        assert_eq!(partition_key_of(r#"{"_partition_key":"acme","x":1}"#), Some("acme".into()));
        assert_eq!(partition_key_of("{}"), None);
    }
}
