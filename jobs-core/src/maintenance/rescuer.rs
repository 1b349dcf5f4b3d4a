//! The rescuer: returns `running` jobs that nobody runs any more — their node stopped
//! heartbeating, or they overran their timeout — to the queue (or discards them when out
//! of attempts). Fenced on the attempt, so the original worker's late outcome is ignored.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{ServiceContext, leader_loop};
use crate::db;
use crate::error::Result;

/// Settings of the [`Rescuer`].
#[derive(Debug, Clone)]
pub struct RescuerConfig {
    /// How often to look for stuck jobs.
    pub interval: Duration,
    /// A node whose heartbeat is older than this is considered gone.
    pub node_stale_after: Duration,
    /// How long past its timeout a job may still be running before it is rescued (the
    /// worker enforces timeouts itself; this catches workers that cannot).
    pub timeout_grace: Duration,
    /// The most jobs rescued per statement.
    pub batch: i64,
}

impl Default for RescuerConfig {
    fn default() -> Self {
        RescuerConfig {
            interval: Duration::from_secs(2),
            node_stale_after: Duration::from_secs(10),
            timeout_grace: Duration::from_secs(5),
            batch: 1_000,
        }
    }
}

/// Rescues abandoned jobs.
#[derive(Debug, Clone, Default)]
pub struct Rescuer {
    config: RescuerConfig,
}

impl Rescuer {
    /// A rescuer with `config`.
    pub fn new(config: RescuerConfig) -> Rescuer {
        Rescuer { config }
    }

    /// One pass. Returns the ids of the rescued jobs.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<Vec<i64>> {
        let mut conn = ctx.pool.get().await?;
        let mut rescued = Vec::new();
        loop {
            let ids = db::maintenance::rescue_stuck(
                &mut conn,
                self.config.node_stale_after,
                self.config.timeout_grace,
                self.config.batch,
                &ctx.node,
                ctx.clock.db_now(),
            )
            .await?;
            let done = (ids.len() as i64) < self.config.batch;
            rescued.extend(ids);
            if done {
                return Ok(rescued);
            }
        }
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        leader_loop(&ctx, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(ids) if ids.is_empty() => {}
                Ok(ids) => {
                    metrics::counter!("jobs_rescued_total").increment(ids.len() as u64);
                    tracing::warn!(count = ids.len(), ids = ?ids, "rescued abandoned jobs");
                }
                Err(e) => tracing::warn!(error = %e, "rescuer pass failed"),
            }
        })
        .await;
    }
}
