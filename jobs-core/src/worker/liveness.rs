//! Keeping the node's liveness lock ([`jobs_driver::NodeLock`]) on a task of its own, every
//! heartbeat interval: its connection checked (the lock taken again on a new one when it
//! was lost) and, where the driver writes one, its time stamped. Apart from the heartbeat,
//! so that a database write that waits (SQLite's write lock held by a busy process, say)
//! never keeps the lock's time from moving. The lock is released when this task ends: at
//! shutdown, or when the node is killed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use jobs_driver::NodeLock;
use tokio_util::sync::CancellationToken;

use super::shared::Shared;

/// Keeps `lock` once: returns whether the node still holds its name.
async fn keep(shared: &Shared, lock: &mut dyn NodeLock) -> bool {
    match lock.keep().await {
        Ok(true) => {
            *shared.lock_key.lock().unwrap_or_else(|e| e.into_inner()) = Some(lock.key().to_owned());
            true
        }
        Ok(false) => {
            *shared.lock_key.lock().unwrap_or_else(|e| e.into_inner()) = None;
            tracing::error!(
                node = %shared.node,
                "another process took this node's name while its liveness lock was lost; \
                 this node claims nothing and hands back no orphans until it holds the name again"
            );
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "keeping the node's liveness lock failed; trying again at the next heartbeat");
            // The database is unreachable: nothing says another process has the name.
            true
        }
    }
}

/// Keeps `lock` every heartbeat interval until `stop` fires.
pub(crate) async fn run(shared: Arc<Shared>, mut lock: Box<dyn NodeLock>, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(shared.config.heartbeat_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                let owned = keep(&shared, &mut *lock).await;
                shared.owns_name.store(owned, Ordering::Release);
            }
        }
    }
}
