//! The keys a claim lists, in turn order.

use std::collections::HashSet;

use super::ops::KeyedClaimOps;
use super::turn::PartitionTurn;
use crate::error::Result;

/// The keys a claim lists, and where the new round (if one began) starts among them.
pub(super) struct Walk {
    /// The keys in turn order (`None`: the unkeyed group), each once.
    pub(super) order: Vec<Option<String>>,
    /// Where the new round's keys start in `order`.
    pub(super) split: usize,
    /// Whether a new round began.
    pub(super) began: bool,
    /// The new round's end, if one began.
    pub(super) new_end: Option<String>,
    /// The end of the round under way before.
    pub(super) old_end: Option<String>,
}

impl Walk {
    /// The keyed keys listed.
    pub(super) fn keyed(&self) -> i64 {
        i64::try_from(self.order.iter().flatten().count()).unwrap_or(i64::MAX)
    }
}

/// Lists up to `wanted` keys in turn order from `turn` (the unkeyed group too, first in a
/// round that begins, when `unkeyed`): what is left of the round under way (after the
/// turn, up to the round's end), then, if that is short, a new round (the unkeyed group,
/// the keys up to the turn, the keys after the old round's end). The parts never overlap;
/// the new round's start is at `split`.
pub(super) async fn walk<O: KeyedClaimOps>(
    ops: &mut O,
    turn: &PartitionTurn,
    unkeyed: bool,
    wanted: i64,
) -> Result<Walk> {
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
    Ok(Walk { order, split, began, new_end, old_end })
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
