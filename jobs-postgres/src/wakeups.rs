//! Waking the workers after enqueues through a [`Pool`]: at most one wake-up per queue per
//! [`WAKE_WINDOW`], and none later than that after the insert that needed it.
//!
//! An insert that makes jobs available must be followed by a NOTIFY on their queue, or idle
//! workers find the jobs only at their next poll. A NOTIFY is not free: as its own statement
//! it is a round trip and a transaction, and inside the insert it makes the commit take the
//! cluster-wide lock that serializes notifying commits. Under a stream of enqueues the
//! wake-ups cost about a seventh of the enqueue throughput (docs/benchmarks.md), and every
//! one but the first of a burst wakes workers that are already awake.
//!
//! So, per pool and queue:
//! - the first enqueue of a window notifies from its own insert statement (the leading
//!   edge: no extra round trip, delivered with its commit);
//! - an enqueue within the window ([`WAKE_WINDOW`] unless [`set_wake_window`] says
//!   otherwise) of the last wake-up does not notify; after its
//!   commit it makes sure one trailing wake-up is scheduled for the end of the window,
//!   sent as a statement of its own on a pool connection.
//!
//! Every insert is thus followed by a wake-up sent after its commit, at most
//! [`WAKE_WINDOW`] later; a stream of enqueues sends one per window. Wake-ups are hints: if
//! one fails (or the process exits first) the workers find the jobs at their next poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use jobs_driver::wake_ration::{WakeRation, due_queues};
use jobs_driver::{Inserted, NewJob, Result};

use crate::jobs::insert::{insert_many_committed, notify_available};
use crate::pool::{self, Pool};

/// The default window: the longest a wake-up is held back after the insert that needs it,
/// and the shortest time between two wake-ups of one queue from one pool. The worker's own
/// `fetch_cooldown` has the same default: both trade up to 2 ms of latency for batching.
/// Change it per pool with [`set_wake_window`].
pub const WAKE_WINDOW: Duration = Duration::from_millis(2);

/// Sets the wake-up window of enqueues through `pool` (and its clones): a longer one sends
/// fewer notifications for bursts at the cost of up to that much pickup latency; zero
/// makes every insert notify from its own statement.
pub fn set_wake_window(pool: &Pool, window: Duration) {
    for_pool(pool).ration.set_window(window);
}

type WeakPool = deadpool::managed::WeakPool<AsyncDieselConnectionManager<AsyncPgConnection>>;

/// The wake-up state of one pool.
struct PoolWakeups {
    pool: WeakPool,
    ration: Arc<WakeRation>,
}

/// The state of every live pool that enqueued, keyed by the address of the pool's manager
/// (shared by its clones). The entry holds a weak reference to the pool, which keeps that
/// address from being reused by another pool while the entry exists.
static POOLS: Mutex<Vec<(usize, Arc<PoolWakeups>)>> = Mutex::new(Vec::new());

/// The wake-up state of `pool`.
fn for_pool(pool: &Pool) -> Arc<PoolWakeups> {
    let key = std::ptr::from_ref(pool.manager()) as usize;
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, found)) = pools.iter().find(|(k, _)| *k == key) {
        return found.clone();
    }
    // A new pool: drop the entries of pools that are gone.
    pools.retain(|(_, p)| p.pool.upgrade().is_some());
    let created = Arc::new(PoolWakeups { pool: pool.weak(), ration: Arc::new(WakeRation::new(WAKE_WINDOW)) });
    pools.push((key, created.clone()));
    created
}

impl PoolWakeups {
    /// Called after an insert that did not notify has committed jobs available in
    /// `queues`: makes sure a wake-up for each is sent after now, at the end of its window.
    fn cover(&self, queues: Vec<String>) {
        // The pool is gone: nobody is left to enqueue or to be woken.
        let Some(pool) = self.pool.upgrade() else { return };
        let pool = pool.weak();
        self.ration.cover(queues, move |queues| send_trailing(pool, queues));
    }
}

/// Sends a trailing wake-up (its flags already cleared: an insert that still sees one set
/// is covered by this statement, sent after it looked).
async fn send_trailing(pool: WeakPool, queues: Vec<String>) {
    let Some(pool) = pool.upgrade() else { return };
    let sent = async {
        let mut conn = pool::get(&pool).await?;
        notify_available(&mut conn, &queues).await
    }
    .await;
    if let Err(e) = sent {
        tracing::warn!(error = %e, "waking the workers failed; they find the jobs at their next poll");
    }
}

/// Inserts `jobs` through `pool`: the insert commits by itself and returns, and its
/// wake-up is rationed per queue (see the module docs): the first insert of a window
/// notifies from its own statement; later ones in the window get one trailing wake-up at
/// its end.
///
/// Through a pooler in transaction mode (a pool of [`pooler::pool`](crate::pooler::pool)),
/// the insert runs in a transaction of its own and notifies from its own statement.
pub async fn insert_through_pool(
    pool: &Pool,
    jobs: &[NewJob],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<Inserted>> {
    insert(pool, jobs, now, crate::pooler::is_pooler_pool(pool)).await
}

/// [`insert_through_pool`], through a pooler if `through_pooler`.
pub(crate) async fn insert(
    pool: &Pool,
    jobs: &[NewJob],
    now: Option<DateTime<Utc>>,
    through_pooler: bool,
) -> Result<Vec<Inserted>> {
    if through_pooler {
        // Through a pooler: in a transaction of its own, notifying from its own statement
        // (a trailing wake-up would be a statement outside any transaction).
        let mut conn = crate::op_conn::OpConn::begin(pool, true).await?;
        let inserted = insert_many_committed(conn.conn(), jobs, now, true).await;
        return conn.finish(inserted).await.map(|(inserted, _)| inserted);
    }
    let wakeups = for_pool(pool);
    let due = due_queues(jobs);
    let leading = !due.is_empty() && wakeups.ration.claim_leading(&due);
    let mut conn = pool::get(pool).await?;
    let (inserted, queues) = insert_many_committed(&mut conn, jobs, now, leading).await?;
    drop(conn);
    if !leading && !queues.is_empty() {
        wakeups.cover(queues);
    }
    Ok(inserted)
}
