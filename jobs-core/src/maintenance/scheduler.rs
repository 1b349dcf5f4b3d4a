//! The scheduler: makes scheduled and retryable jobs available when they are due.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{ServiceContext, leader_loop};
use crate::db;
use crate::error::Result;

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
        let mut conn = ctx.pool.get().await?;
        let mut total = 0;
        loop {
            let moved =
                db::maintenance::schedule_due(&mut conn, self.config.batch, ctx.clock.db_now()).await?;
            total += moved;
            if moved < self.config.batch {
                return Ok(total);
            }
        }
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        leader_loop(&ctx, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(moved = n, "scheduled jobs made available"),
                Err(e) => tracing::warn!(error = %e, "scheduler pass failed"),
            }
        })
        .await;
    }
}
