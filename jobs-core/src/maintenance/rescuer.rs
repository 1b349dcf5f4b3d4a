//! The rescuer: returns `running` jobs that nobody runs any more — their node stopped
//! heartbeating, or they overran their timeout — to the queue (or discards them when out
//! of attempts). Fenced on the attempt, so the original worker's late outcome is ignored.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::JobRescueStuckParams;

use super::context::{ServiceContext, leader_loop};
use crate::error::Result;
use crate::settings;

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

impl RescuerConfig {
    /// Checks the settings: positive interval and staleness, a grace of at most a week, a
    /// batch of 1 to 100,000.
    pub fn validate(&self) -> Result<()> {
        settings::period("rescuer.interval", self.interval)?;
        settings::period("rescuer.node_stale_after", self.node_stale_after)?;
        settings::at_most_max_period("rescuer.timeout_grace", self.timeout_grace)?;
        settings::count("rescuer.batch", self.batch, settings::MAX_BATCH)
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
        self.config.validate()?;
        let mut rescued = Vec::new();
        loop {
            let params = JobRescueStuckParams {
                node_stale_after: self.config.node_stale_after,
                timeout_grace: self.config.timeout_grace,
                limit: self.config.batch,
                rescuer: &ctx.node,
                now: ctx.clock.db_now(),
            };
            let ids = ctx.driver.job_rescue_stuck(params).await?;
            let done = (ids.len() as i64) < self.config.batch;
            rescued.extend(ids);
            if done {
                return Ok(rescued);
            }
        }
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let config = ("rescuer", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
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
