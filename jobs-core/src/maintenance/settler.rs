//! The settler: the safety net of workflows (`docs/design/workflows.md`). The completer
//! settles a workflow step's finish at once, for its dependents; the settler finds every
//! other finish that left unsettled edges — a crash between the completion and its
//! settle, a dependency that finished while the insert of its dependent was still open,
//! the rescuer's discards, a person's cancel that failed half-way, a dependency outside
//! any workflow, a cascade longer than a call's rounds — and settles it. It reads only
//! the unsettled edges (an index of them), never the finished jobs.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::{JobSettleParams, Settled};

use super::service_context::{ServiceContext, leader_loop};
use crate::error::Result;
use crate::settings;

/// Settings of the [`Settler`].
#[derive(Debug, Clone)]
pub struct SettlerConfig {
    /// How often to look for unsettled finishes (default a second): how late, at most, a
    /// dependent starts after a finish that no completion settled.
    pub interval: Duration,
    /// Finished jobs per pass, and dependents per transaction (default 1,000).
    pub batch: i64,
}

impl Default for SettlerConfig {
    fn default() -> Self {
        SettlerConfig { interval: Duration::from_secs(1), batch: 1_000 }
    }
}

impl SettlerConfig {
    /// Checks the settings: a positive interval, a batch of 1 to 100,000.
    pub fn validate(&self) -> Result<()> {
        settings::period("settler.interval", self.interval)?;
        settings::count("settler.batch", self.batch, settings::MAX_BATCH)
    }
}

/// How many pages of the unsettled edges one pass reads at most (a batch of dependencies
/// each); the next pass goes on from where it stopped.
const PAGES_PER_PASS: usize = 10;

/// Settles the finishes of dependencies that nothing settled yet.
#[derive(Debug, Clone, Default)]
pub struct Settler {
    config: SettlerConfig,
    /// Where the next page starts (shared by the clones of this settler).
    cursor: Arc<AtomicI64>,
}

impl Settler {
    /// A settler with `config`.
    pub fn new(config: SettlerConfig) -> Settler {
        Settler { config, cursor: Arc::default() }
    }

    /// One pass: reads the unsettled edges page by page (a batch of dependencies each, at
    /// most `PAGES_PER_PASS` pages) from where the last pass stopped, and settles the
    /// finished (or deleted) dependencies among them and the cascades they start. Returns
    /// what it did; its `next` is `None` when the pass reached the end of the unsettled
    /// edges (the next pass starts over).
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<Settled> {
        self.config.validate()?;
        let limit = usize::try_from(self.config.batch).unwrap_or(1);
        let mut done = Settled::default();
        for _ in 0..PAGES_PER_PASS {
            let after = self.cursor.load(Ordering::Relaxed);
            let params = JobSettleParams { finished: None, after, limit, now: ctx.clock.db_now() };
            let page = ctx.driver.job_settle(params).await?;
            done.settled += page.settled;
            done.released += page.released;
            done.cancelled += page.cancelled;
            done.more |= page.more;
            done.next = page.next;
            self.cursor.store(page.next.unwrap_or(0), Ordering::Relaxed);
            if page.next.is_none() {
                break;
            }
        }
        Ok(done)
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let config = ("settler", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(done) if done.settled == 0 => {}
                Ok(done) => tracing::debug!(
                    settled = done.settled,
                    released = done.released,
                    cancelled = done.cancelled,
                    "settled finished dependencies"
                ),
                Err(e) => tracing::warn!(error = %e, "settler pass failed"),
            }
        })
        .await;
    }
}
