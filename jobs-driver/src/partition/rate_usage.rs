//! The rate usage of the keys a claim lists: read under the queue's lock, applied to the
//! keys' room, written back for the keys served.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::key::partition_key_of;
use super::ops::KeyedClaimOps;
use super::rate::{KeyRate, UNKEYED_RATE_KEY, rate_key};
use crate::error::Result;
use crate::job::ClaimedJob;
use crate::queue_limits::RateLimit;

/// The stored usage of the keys a claim listed.
#[derive(Debug, Default)]
pub(super) struct KeyRates {
    /// Each listed key's stored usage (keys without a row are not in it).
    by_key: HashMap<Option<String>, KeyRate>,
    /// The listed keys whose rate is used up though their row does not say so.
    pub(super) unforeseen: Vec<Option<String>>,
}

impl KeyRates {
    /// Reads the usage of the keys in `order`.
    pub(super) async fn read<O: KeyedClaimOps>(
        ops: &mut O,
        rate: RateLimit,
        order: &[Option<String>],
        now: DateTime<Utc>,
    ) -> Result<KeyRates> {
        let texts: Vec<String> = order.iter().map(|k| rate_key(k.as_deref()).to_owned()).collect();
        let stored = if texts.is_empty() { Vec::new() } else { ops.key_rates(&texts).await? };
        let by_key: HashMap<Option<String>, KeyRate> =
            stored.into_iter().map(|r| ((r.key != UNKEYED_RATE_KEY).then(|| r.key.clone()), r)).collect();
        let unforeseen = by_key
            .iter()
            .filter(|(_, r)| rate.left(Some(&r.window), now) == 0 && r.blocked_until.is_none_or(|t| t <= now))
            .map(|(key, _)| key.clone())
            .collect();
        Ok(KeyRates { by_key, unforeseen })
    }

    /// Whether `key`'s rate is used up at `now`.
    pub(super) fn used_up(&self, rate: RateLimit, key: &Option<String>, now: DateTime<Utc>) -> bool {
        rate.left(self.by_key.get(key).map(|r| &r.window), now) == 0
    }

    /// Lowers each listed key's room in `running` to what its rate leaves (as if it ran
    /// what it may no longer start), `per_key` being the limit on what runs.
    pub(super) fn lower_room(
        &self,
        rate: RateLimit,
        order: &[Option<String>],
        running: &mut HashMap<Option<String>, i64>,
        per_key: i64,
        now: DateTime<Utc>,
    ) {
        for key in order {
            let left = rate.left(self.by_key.get(key).map(|r| &r.window), now);
            let taken = running.entry(key.clone()).or_default();
            *taken = (*taken).max(per_key.saturating_sub(left));
        }
    }

    /// Stores the usage of the keys that started jobs and of those found used up
    /// unforeseen, and forgets the windows that count nothing any more.
    pub(super) async fn store<O: KeyedClaimOps>(
        &self,
        ops: &mut O,
        rate: RateLimit,
        claimed: &[ClaimedJob],
        now: DateTime<Utc>,
    ) -> Result<()> {
        let mut started: HashMap<Option<String>, i64> =
            self.unforeseen.iter().map(|k| (k.clone(), 0)).collect();
        for job in claimed {
            *started.entry(partition_key_of(&job.meta)).or_default() += 1;
        }
        let mut rates: Vec<KeyRate> = started
            .into_iter()
            .map(|(key, n)| {
                let window = rate.after(self.by_key.get(&key).map(|r| &r.window), n, now);
                let blocked_until = rate.blocked_until(&window);
                KeyRate { key: rate_key(key.as_deref()).to_owned(), window, blocked_until }
            })
            .collect();
        rates.sort_by(|a, b| a.key.cmp(&b.key));
        let stale_before = now - (rate.forgotten_after(now) - now);
        ops.store_key_rates(&rates, stale_before).await
    }
}
