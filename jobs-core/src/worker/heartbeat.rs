//! The node's heartbeat: keeps its liveness lock (taking it again if its connection was
//! lost) and its node row fresh so the rescuer leaves its jobs alone, publishes each
//! queue's load for the dashboard, hands back claims whose reply it never received, and —
//! while no notifications arrive — asks which of its jobs were cancelled.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use jobs_driver::{JobListCancelRequestedParams, JobReleaseOrphansParams, NodeHeartbeatParams, NodeLock};
use tokio_util::sync::CancellationToken;

use super::listener::cancel_running;
use super::runtime::Shared;
use crate::error::Result;
use crate::maintenance::ServiceContext;

/// Writes one heartbeat.
pub(crate) async fn beat(shared: &Shared) -> Result<()> {
    let queues: serde_json::Map<String, serde_json::Value> = shared
        .queues
        .values()
        .map(|q| {
            let limit = q.limit.current();
            let running = q.limit.in_use(&q.slots);
            let buffered = q.buffered();
            (
                q.name.to_string(),
                serde_json::json!({ "limit": limit, "running": running, "buffered": buffered }),
            )
        })
        .collect();
    let queues = serde_json::Value::Object(queues);
    let kinds = shared.registry.kinds();
    let lock = shared.lock_key.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let params = NodeHeartbeatParams {
        node: &shared.node,
        host: &shared.host,
        pid: shared.pid,
        queues: &queues,
        kinds: &kinds,
        now: shared.clock.db_now(),
        lock: lock.as_deref(),
    };
    Ok(shared.driver.node_heartbeat(params).await?)
}

/// Hands back the jobs the database says this node runs but the node does not hold.
pub(crate) async fn release_orphans(shared: &Shared) -> Result<Vec<i64>> {
    let held: Vec<(i64, i32)> =
        shared.held.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect();
    let params = JobReleaseOrphansParams {
        node: &shared.node,
        held: &held,
        grace: shared.config.orphan_grace,
        now: shared.clock.db_now(),
    };
    Ok(shared.driver.job_release_orphans(params).await?)
}

/// Stops the running jobs whose cancellation was requested: the fallback for drivers (or
/// moments) without notifications.
async fn poll_cancellations(shared: &Shared) -> Result<()> {
    let ids: Vec<i64> = shared.running.lock().unwrap_or_else(|e| e.into_inner()).job_ids();
    if ids.is_empty() {
        return Ok(());
    }
    let cancelled =
        shared.driver.job_list_cancel_requested(JobListCancelRequestedParams { ids: &ids }).await?;
    for id in cancelled {
        cancel_running(shared, id);
    }
    Ok(())
}

/// Keeps the node's liveness lock: takes it again when its connection was lost. Returns
/// whether the node holds it (false when another process took the name meanwhile, or
/// the database cannot be reached).
async fn keep_lock(shared: &Shared, lock: &mut dyn NodeLock) -> bool {
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
                 this node hands back no orphans until it holds the name again"
            );
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "keeping the node's liveness lock failed; trying again at the next heartbeat");
            false
        }
    }
}

/// Beats every heartbeat interval until `stop` fires, keeping `lock` (the node's liveness
/// lock, released when this task ends: at shutdown, or when the node is killed). A failed
/// beat is noted on `ctx` (the rescuer waits for the database to have been reachable a
/// while before it judges other nodes by their silence).
pub(crate) async fn run(
    shared: Arc<Shared>,
    ctx: ServiceContext,
    stop: CancellationToken,
    mut lock: Option<Box<dyn NodeLock>>,
) {
    let mut ticker = tokio::time::interval(shared.config.heartbeat_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                // With the lock lost to another process, the name's running jobs may be
                // that process's: this node must not release them as its orphans.
                let own_name = match lock.as_deref_mut() {
                    Some(lock) => keep_lock(&shared, lock).await,
                    None => true,
                };
                if let Err(e) = beat(&shared).await {
                    ctx.note_database_failure();
                    tracing::warn!(error = %e, "heartbeat failed");
                }
                if !own_name {
                    continue;
                }
                match release_orphans(&shared).await {
                    Ok(ids) if ids.is_empty() => {}
                    Ok(ids) => {
                        metrics::counter!("jobs_rescued_total").increment(ids.len() as u64);
                        tracing::warn!(count = ids.len(), ids = ?ids, "released claims whose reply was lost");
                    }
                    Err(e) => tracing::warn!(error = %e, "checking for orphaned claims failed"),
                }
                if !shared.listening.load(Ordering::Acquire)
                    && let Err(e) = poll_cancellations(&shared).await
                {
                    tracing::warn!(error = %e, "checking for cancelled jobs failed");
                }
            }
        }
    }
}
