//! The pruner: deletes finished jobs older than their state's retention, in bounded
//! batches so that it never holds long locks or bloats one transaction; then sweeps the
//! workflows' rows, removing those no member is left in.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::{JobPruneParams, JobState, StatsCompactParams, StatsPruneParams, WorkflowPruneParams};

use super::service_context::{ServiceContext, leader_loop, while_full};
use crate::error::Result;
use crate::settings;

/// Settings of the [`Pruner`].
#[derive(Debug, Clone)]
pub struct PrunerConfig {
    /// How often to prune.
    pub interval: Duration,
    /// How long completed jobs are kept (`None`: forever).
    pub completed: Option<Duration>,
    /// How long cancelled jobs are kept.
    pub cancelled: Option<Duration>,
    /// How long discarded jobs are kept.
    pub discarded: Option<Duration>,
    /// How long the per-minute outcome counters (`job_stats`) are kept (default 8 days:
    /// the dashboard charts up to a week).
    pub stats: Duration,
    /// Per-minute counters older than this are rolled up into hourly ones (default a day:
    /// the dashboard's day chart reads minutes, its week chart and week of kinds hours).
    pub stats_hourly_after: Duration,
    /// Per-kind counters (`job_kind_stats`) older than this are rolled up into hourly ones
    /// (default two hours: the kinds page sums an hour of minutes, or hours for a day or a
    /// week; a day of minutes of 120 busy kinds took 0.5 s to sum on Postgres and 1.8 s on
    /// SQLite, docs/benchmarks.md).
    pub kind_stats_hourly_after: Duration,
    /// Rows deleted per statement from each table that keeps finished jobs (on Postgres,
    /// `jobs` and the archive).
    pub batch: i64,
    /// Statements per state per pass: a pass deletes batch after batch while they come
    /// back full, up to this many (the rest waits for the next pass). The defaults allow
    /// 50 M rows per state per pass, so the pruner keeps pace with any queue this table can
    /// carry; a cap of 100 batches of 1,000 a minute had let a queue finishing more than
    /// 1,700 jobs/s outgrow its retention (docs/benchmarks.md, "Sustained").
    pub max_batches: u32,
}

impl Default for PrunerConfig {
    fn default() -> Self {
        PrunerConfig {
            interval: Duration::from_secs(60),
            completed: Some(Duration::from_secs(24 * 3600)),
            cancelled: Some(Duration::from_secs(7 * 24 * 3600)),
            discarded: Some(Duration::from_secs(7 * 24 * 3600)),
            stats: Duration::from_secs(8 * 24 * 3600),
            stats_hourly_after: Duration::from_secs(24 * 3600),
            kind_stats_hourly_after: Duration::from_secs(2 * 3600),
            batch: 5_000,
            max_batches: 10_000,
        }
    }
}

impl PrunerConfig {
    /// Checks the settings: a positive interval, a batch of 1 to 100,000, and at least one
    /// batch per pass. Retentions may be anything (zero deletes finished jobs at the next
    /// pass; `None` keeps them forever).
    pub fn validate(&self) -> Result<()> {
        settings::period("pruner.interval", self.interval)?;
        settings::count("pruner.batch", self.batch, settings::MAX_BATCH)?;
        settings::count("pruner.max_batches", i64::from(self.max_batches), i64::from(u32::MAX))
    }
}

/// How many pages of workflows' rows one pass sweeps (at the default batch, 100,000
/// rows): a larger table is swept over several passes, from where the last one stopped.
const WORKFLOW_PAGES_PER_PASS: usize = 20;

/// Deletes old finished jobs.
#[derive(Debug, Clone, Default)]
pub struct Pruner {
    config: PrunerConfig,
    /// Where the next sweep of workflows' rows starts (`0`: at the first).
    workflows_after: Arc<AtomicI64>,
}

impl Pruner {
    /// A pruner with `config`.
    pub fn new(config: PrunerConfig) -> Pruner {
        Pruner { config, workflows_after: Arc::default() }
    }

    /// One pass over the three final states, the workflows they emptied, and the old
    /// outcome counters. Returns how many jobs went.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<i64> {
        self.config.validate()?;
        let mut total = 0;
        let retention = [
            (JobState::Completed, self.config.completed),
            (JobState::Cancelled, self.config.cancelled),
            (JobState::Discarded, self.config.discarded),
        ];
        for (state, keep) in retention {
            let Some(keep) = keep else { continue };
            total += while_full(self.config.max_batches, self.config.batch, || async {
                let params = JobPruneParams {
                    state,
                    retention: keep,
                    limit: self.config.batch,
                    now: ctx.clock.db_now(),
                };
                Ok(ctx.driver.job_prune(params).await?)
            })
            .await?;
        }
        // A failed sweep of workflows' rows waits for the next pass; the counters go on.
        if let Err(e) = self.prune_workflows(ctx).await {
            tracing::warn!(error = %e, "sweeping emptied workflows failed: the next pass goes on");
        }
        ctx.driver.stats_prune(StatsPruneParams { keep: self.config.stats, now: ctx.clock.db_now() }).await?;
        let compact = StatsCompactParams {
            older_than: self.config.stats_hourly_after,
            kinds_older_than: self.config.kind_stats_hourly_after,
            now: ctx.clock.db_now(),
        };
        ctx.driver.stats_compact(compact).await?;
        Ok(total)
    }

    /// Sweeps the workflows' rows on from where the last pass stopped, at most
    /// `WORKFLOW_PAGES_PER_PASS` (20) pages of `batch`, and removes those no member is left
    /// in (`Driver::workflow_prune`): after the jobs the pruner removed, and any a person
    /// (through an application's connection) or a delete-on-completion queue removed.
    /// Each row costs a lookup or two in an index of members; only empty ones are locked.
    /// Returns how many rows went.
    pub async fn prune_workflows(&self, ctx: &ServiceContext) -> Result<usize> {
        let limit = usize::try_from(self.config.batch).unwrap_or(usize::MAX);
        let mut deleted = 0;
        for _ in 0..WORKFLOW_PAGES_PER_PASS {
            let after = self.workflows_after.load(Ordering::Relaxed);
            let page = ctx.driver.workflow_prune(WorkflowPruneParams { after, limit }).await?;
            deleted += page.deleted;
            self.workflows_after.store(page.next.unwrap_or(0), Ordering::Relaxed);
            if page.next.is_none() {
                break;
            }
        }
        if deleted > 0 {
            tracing::debug!(deleted, "pruned emptied workflows");
        }
        Ok(deleted)
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let config = ("pruner", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(deleted = n, "pruned finished jobs"),
                Err(e) => tracing::warn!(error = %e, "pruner pass failed"),
            }
        })
        .await;
    }
}
