//! The node's heartbeat: keeps its `job_nodes` row fresh so the rescuer leaves its jobs
//! alone, publishes each queue's load for the dashboard, and hands back claims whose
//! reply it never received.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::runtime::Shared;
use crate::db;
use crate::error::Result;

/// Writes one heartbeat.
pub(crate) async fn beat(shared: &Shared) -> Result<()> {
    let queues: serde_json::Map<String, serde_json::Value> = shared
        .queues
        .values()
        .map(|q| {
            let limit = q.config.concurrency;
            let running = limit.saturating_sub(q.slots.available_permits());
            (q.name.to_string(), serde_json::json!({ "limit": limit, "running": running }))
        })
        .collect();
    let mut conn = shared.pool.get().await?;
    db::nodes::heartbeat(
        &mut conn,
        &shared.node,
        &shared.host,
        shared.pid,
        &serde_json::Value::Object(queues),
        shared.clock.db_now(),
    )
    .await
}

/// Hands back the jobs the database says this node runs but the node does not hold.
pub(crate) async fn release_orphans(shared: &Shared) -> Result<Vec<i64>> {
    let held: Vec<i64> = shared.held.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect();
    let mut conn = shared.pool.get().await?;
    db::maintenance::release_orphans(
        &mut conn,
        &shared.node,
        &held,
        shared.config.orphan_grace,
        shared.clock.db_now(),
    )
    .await
}

/// Beats every heartbeat interval until `stop` fires.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    let mut ticker = tokio::time::interval(shared.config.heartbeat_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                if let Err(e) = beat(&shared).await {
                    tracing::warn!(error = %e, "heartbeat failed");
                }
                match release_orphans(&shared).await {
                    Ok(ids) if ids.is_empty() => {}
                    Ok(ids) => {
                        metrics::counter!("jobs_rescued_total").increment(ids.len() as u64);
                        tracing::warn!(count = ids.len(), ids = ?ids, "released claims whose reply was lost");
                    }
                    Err(e) => tracing::warn!(error = %e, "checking for orphaned claims failed"),
                }
            }
        }
    }
}
