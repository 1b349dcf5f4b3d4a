//! The node's heartbeat: keeps its node row fresh so the rescuer leaves its jobs alone,
//! publishes each queue's load for the dashboard, hands back claims whose reply it never
//! received, and — while no notifications arrive — asks which of its jobs were cancelled.
//! (Its liveness lock is kept by a task of its own, `liveness`, which no slow database
//! write holds up.)

use std::sync::Arc;
use std::sync::atomic::Ordering;

use jobs_driver::{JobListCancelRequestedParams, JobReleaseOrphansParams, NodeHeartbeatParams};
use tokio_util::sync::CancellationToken;

use super::listener::cancel_running;
use super::shared::Shared;
use crate::error::Result;
use crate::maintenance::ServiceContext;

/// Writes one heartbeat (`registering`: the process's first).
pub(crate) async fn beat(shared: &Shared, registering: bool) -> Result<()> {
    let queues: serde_json::Map<String, serde_json::Value> = shared
        .queues
        .values()
        .map(|q| {
            let limit = q.limit.current();
            let running = q.limit.in_use(&q.slots);
            let buffered = q.buffered();
            let mut load = serde_json::json!({ "limit": limit, "running": running, "buffered": buffered });
            // The limits this node declares, which apply where none is stored: for the
            // dashboard, which reads only the stored ones from the database.
            if q.declared.any() {
                let d = q.declared;
                load["declared"] = serde_json::json!({
                    "global_limit": d.global_limit,
                    "per_key_limit": d.per_key_limit,
                    "rate_allowed": d.rate.map(|r| r.allowed),
                    "rate_period_secs": d.rate.map(|r| r.period_secs),
                    "per_key_rate_allowed": d.per_key_rate.map(|r| r.allowed),
                    "per_key_rate_period_secs": d.per_key_rate.map(|r| r.period_secs),
                });
            }
            (q.name.to_string(), load)
        })
        .collect();
    let queues = serde_json::Value::Object(queues);
    let kinds = shared.registry.kinds();
    let kind_options = shared.registry.published_options();
    let lock = shared.lock_key.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let params = NodeHeartbeatParams {
        node: &shared.node,
        host: &shared.host,
        pid: shared.pid,
        queues: &queues,
        kinds: &kinds,
        kind_options: &kind_options,
        now: shared.clock.db_now(),
        lock: lock.as_deref(),
        registering,
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

/// Beats every heartbeat interval until `stop` fires. A failed beat is noted on `ctx` (the
/// rescuer waits for the database to have been reachable a while before it judges other
/// nodes by their silence).
pub(crate) async fn run(shared: Arc<Shared>, ctx: ServiceContext, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(shared.config.heartbeat_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                if let Err(e) = beat(&shared, false).await {
                    ctx.note_database_failure();
                    tracing::warn!(error = %e, "heartbeat failed");
                }
                // With the lock lost to another process, the name's running jobs may be
                // that process's: this node must not release them as its orphans.
                if !shared.owns_name.load(Ordering::Acquire) {
                    continue;
                }
                match release_orphans(&shared).await {
                    Ok(ids) if ids.is_empty() => {}
                    Ok(ids) => {
                        ::metrics::counter!(crate::metrics::RESCUED).increment(ids.len() as u64);
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
