//! Dealing a claim's allowance out over the keys, one per key per pass.

use std::collections::HashMap;

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
