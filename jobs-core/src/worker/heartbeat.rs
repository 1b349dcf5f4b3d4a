//! The node's heartbeat: keeps its `job_nodes` row fresh so the rescuer leaves its jobs
//! alone, and publishes each queue's load for the dashboard.

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
            }
        }
    }
}
