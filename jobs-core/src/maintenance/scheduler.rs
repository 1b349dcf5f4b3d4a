//! The scheduler: makes scheduled and retryable jobs available when they are due.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::JobScheduleDueParams;

use super::service_context::{ServiceContext, leader_loop};
use crate::error::Result;
use crate::settings;

/// Settings of the [`Scheduler`].
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// How often to look for due jobs.
    pub interval: Duration,
    /// The most jobs moved per statement.
    pub batch: i64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig { interval: Duration::from_secs(1), batch: 5_000 }
    }
}

impl SchedulerConfig {
    /// Checks the settings: a positive interval, a batch of 1 to 100,000.
    pub fn validate(&self) -> Result<()> {
        settings::period("scheduler.interval", self.interval)?;
        settings::count("scheduler.batch", self.batch, settings::MAX_BATCH)
    }
}

/// Moves due jobs to `available`.
#[derive(Debug, Clone, Default)]
pub struct Scheduler {
    config: SchedulerConfig,
}

impl Scheduler {
    /// A scheduler with `config`.
    pub fn new(config: SchedulerConfig) -> Scheduler {
        Scheduler { config }
    }

    /// One pass: moves every due job, a batch at a time. Returns how many moved.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<i64> {
        self.config.validate()?;
        let mut total = 0;
        loop {
            let params = JobScheduleDueParams { limit: self.config.batch, now: ctx.clock.db_now() };
            let moved = ctx.driver.job_schedule_due(params).await?;
            total += moved;
            if moved < self.config.batch {
                return Ok(total);
            }
        }
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let config = ("scheduler", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(moved = n, "scheduled jobs made available"),
                Err(e) => tracing::warn!(error = %e, "scheduler pass failed"),
            }
        })
        .await;
    }
}
