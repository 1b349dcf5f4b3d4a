//! The archiver: moves jobs that finished outside a completion statement (a failure out
//! of attempts, a cancel, a rescue, a duplicate the scheduler discarded) from the jobs
//! table to the archive, in bounded batches. Successes move in their completion statement;
//! this catches the rest within a second. Only on drivers with
//! [`Capability::Archive`](jobs_driver::Capability::Archive).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::{Capability, JobArchiveParams};

use super::service_context::{ServiceContext, leader_loop, while_full};
use crate::error::Result;
use crate::settings;

/// Settings of the [`Archiver`].
#[derive(Debug, Clone)]
pub struct ArchiverConfig {
    /// How often to look for finished jobs to move (default a second).
    pub interval: Duration,
    /// Rows moved per statement (default 5,000).
    pub batch: i64,
    /// Statements per pass: a pass moves batch after batch while they come back full, up
    /// to this many (default 1,000; the rest waits for the next pass).
    pub max_batches: u32,
}

impl Default for ArchiverConfig {
    fn default() -> Self {
        ArchiverConfig { interval: Duration::from_secs(1), batch: 5_000, max_batches: 1_000 }
    }
}

impl ArchiverConfig {
    /// Checks the settings: a positive interval, a batch of 1 to 100,000, and at least one
    /// batch per pass.
    pub fn validate(&self) -> Result<()> {
        settings::period("archiver.interval", self.interval)?;
        settings::count("archiver.batch", self.batch, settings::MAX_BATCH)?;
        settings::count("archiver.max_batches", i64::from(self.max_batches), i64::from(u32::MAX))
    }
}

/// Moves finished jobs into the archive.
#[derive(Debug, Clone, Default)]
pub struct Archiver {
    config: ArchiverConfig,
}

impl Archiver {
    /// An archiver with `config`.
    pub fn new(config: ArchiverConfig) -> Archiver {
        Archiver { config }
    }

    /// One pass: moves batches while they come back full. Returns how many jobs moved (0 on
    /// a driver without an archive).
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<i64> {
        self.config.validate()?;
        if !ctx.driver.capabilities().has(Capability::Archive) {
            return Ok(0);
        }
        let params = JobArchiveParams { limit: self.config.batch };
        while_full(self.config.max_batches, self.config.batch, || async {
            Ok(ctx.driver.job_archive(params).await?)
        })
        .await
    }

    /// Runs every interval while the node leads, until `stop` fires. Does nothing on a
    /// driver without an archive.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        if !ctx.driver.capabilities().has(Capability::Archive) {
            return;
        }
        let config = ("archiver", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(moved = n, "archived finished jobs"),
                Err(e) => tracing::warn!(error = %e, "archiver pass failed"),
            }
        })
        .await;
    }
}
