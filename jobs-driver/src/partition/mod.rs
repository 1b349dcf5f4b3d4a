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
//! probe; the walk first lists the claim's size of keys, and walks further only when keys
//! at their limit took places in it, as far as all of them could need, however many keys
//! wait), gives each key in turn one job until the
//! claim's allowance is spent or every key is at its limit ([`shares`]), claims those
//! jobs, and stores where the turn stopped. One hot key therefore gets one job per turn
//! like any other: it cannot starve the others. Within a key, jobs go in their usual
//! order (priority, due time, id); across keys, the turn decides.
//!
//! **A rate per key.** A queue may also limit how many jobs start per period for each key
//! (and for the unkeyed group, as one key). Each key's starts are counted as the queue's
//! rate counts its own ([`ClaimLimits`](crate::ClaimLimits): twentieths of the period),
//! in a row of `job_key_rates` per key that started jobs lately ([`KeyRate`]). A claim
//! reads the rows of the keys it walked, gives no key more than its rate leaves, writes
//! the rows of the keys it served and drops the rows that count nothing any more. A key
//! whose rate is used up stores until when: the claim counts those keys and walks that
//! many keys further, so that keys waiting on their rate do not hide keys that may run. A
//! key found used up though its row did not say so (the rate was lowered since, or nodes
//! declare different rates) is stored blocked, and the claim walks further for it: such
//! walks double each time, and the eighth lists every key.
//!
//! **Rounds.** A round ends at the greatest key waiting when it began
//! ([`PartitionTurn::round_end`]); keys that appear later wait for the next round, so a
//! stream of new keys cannot hold back the keys before the turn.
//!
//! **The unkeyed group** takes its turn at the start of each round. On Postgres and SQLite
//! only the keyed jobs are indexed by key (plain queues pay no index entry for this
//! feature), so finding unkeyed jobs reads the queue's line up to the first one, under the
//! queue's lock; when that found none, the group is skipped for [`UNKEYED_RECHECK_MS`],
//! twice as long each time it is found empty again, up to [`UNKEYED_RECHECK_MAX_MS`]. Give
//! every job of a queue with a per-key limit a key, and this costs one read of the line
//! every 30 seconds.
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

mod claim;
mod key;
mod ops;
mod rate;
mod rate_usage;
mod shares;
#[cfg(test)]
mod tests;
mod turn;
mod walk;

pub use claim::{KeyLimits, claim_by_key};
pub use key::{key_text, partition_key_of};
pub use ops::KeyedClaimOps;
pub use rate::{KeyRate, UNKEYED_RATE_KEY, rate_key};
pub use shares::{Share, shares};
pub use turn::{PartitionTurn, UNKEYED_RECHECK_MAX_MS, UNKEYED_RECHECK_MS};

pub use crate::validation::{MAX_PARTITION_KEY_CHARS, PARTITION_META_KEY};
