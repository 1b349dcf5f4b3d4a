//! The rescuer: takes back `running` jobs that nobody runs any more — their node is gone
//! (its liveness lock free, or its heartbeat stale), or they overran their timeout — and
//! gives each the fate of [`jobs_driver::RescueFate::decide`]: back in line in its place
//! (a lost node's attempt not counted), or discarded or cancelled; and forgets nodes long
//! dead. Fenced on the attempt, so the original worker's late outcome is ignored.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use jobs_driver::{JobRescueStuckParams, NodeDeleteStaleParams};

use super::service_context::{ServiceContext, leader_loop};
use crate::error::Result;
use crate::settings;

/// Settings of the [`Rescuer`].
#[derive(Debug, Clone)]
pub struct RescuerConfig {
    /// How often to look for stuck jobs.
    pub interval: Duration,
    /// A node whose heartbeat is older than this is considered gone and its jobs are
    /// rescued, even if its liveness lock is held (a frozen process; a node behind a
    /// pooler, which holds no lock). Only once this node's own database calls have
    /// succeeded for as long: after a database outage every node is silent for a while.
    pub node_stale_after: Duration,
    /// A node whose liveness lock is free (its process died: its connection or file
    /// closed) is gone once its heartbeat is this old. Longer than every node's heartbeat
    /// interval: a live node whose lock connection broke takes its lock again at its next
    /// heartbeat. Default 1.5 s (heartbeats come every second by default).
    pub lock_lost_grace: Duration,
    /// A job rescued this many times without knowing whether it ran — its node lost, or
    /// past its timeout on its last attempt (its `rescued_node_lost` and
    /// `rescued_timeout` entries count) — is discarded instead of handed back (a job that
    /// kills its process or blocks its thread would otherwise take down node after node).
    /// Lost attempts do not count against the job's `max_attempts`. Default 5.
    pub max_node_losses: i32,
    /// A node silent this long is forgotten (its row deleted; its name stays on its jobs'
    /// attempts). At least `node_stale_after`.
    pub forget_nodes_after: Duration,
    /// How long past its timeout a job may still be running before it is rescued (the
    /// worker enforces timeouts itself; this catches workers that cannot).
    pub timeout_grace: Duration,
    /// The most jobs rescued per statement.
    pub batch: i64,
}

impl Default for RescuerConfig {
    fn default() -> Self {
        RescuerConfig {
            interval: Duration::from_secs(1),
            node_stale_after: Duration::from_secs(8),
            lock_lost_grace: Duration::from_millis(1_500),
            max_node_losses: jobs_driver::DEFAULT_MAX_NODE_LOSSES,
            forget_nodes_after: Duration::from_secs(300),
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
        settings::period("rescuer.lock_lost_grace", self.lock_lost_grace)?;
        settings::count("rescuer.max_node_losses", i64::from(self.max_node_losses), 1_000)?;
        settings::period("rescuer.forget_nodes_after", self.forget_nodes_after)?;
        if self.forget_nodes_after < self.node_stale_after {
            return Err(crate::error::Error::InvalidOption {
                option: "rescuer.forget_nodes_after",
                reason: format!(
                    "{:?} is shorter than rescuer.node_stale_after ({:?}): a node would be forgotten before its jobs are rescued",
                    self.forget_nodes_after, self.node_stale_after
                ),
            });
        }
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

    /// One pass: rescues abandoned jobs, then forgets long-dead nodes. Returns the ids of
    /// the rescued jobs.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<Vec<i64>> {
        self.config.validate()?;
        let passed = self.pass(ctx).await;
        if passed.is_err() {
            ctx.note_database_failure();
        }
        passed
    }

    async fn pass(&self, ctx: &ServiceContext) -> Result<Vec<i64>> {
        let lost_nodes = ctx.database_healthy_for(self.config.node_stale_after);
        // A database restart frees every node's lock; live ones take theirs again within
        // a heartbeat interval, and heartbeat, once the database answers again.
        let lost_nodes_by_lock = ctx.database_healthy_for(self.config.lock_lost_grace * 2);
        let mut rescued = Vec::new();
        loop {
            let params = JobRescueStuckParams {
                node_stale_after: self.config.node_stale_after,
                lock_lost_grace: self.config.lock_lost_grace,
                timeout_grace: self.config.timeout_grace,
                lost_nodes,
                lost_nodes_by_lock,
                max_node_losses: self.config.max_node_losses,
                limit: self.config.batch,
                rescuer: &ctx.node,
                now: ctx.clock.db_now(),
            };
            let ids = ctx.driver.job_rescue_stuck(params).await?;
            let done = (ids.len() as i64) < self.config.batch;
            rescued.extend(ids);
            if done {
                break;
            }
        }
        let forget =
            NodeDeleteStaleParams { older_than: self.config.forget_nodes_after, now: ctx.clock.db_now() };
        let forgotten = ctx.driver.node_delete_stale(forget).await?;
        if forgotten > 0 {
            tracing::info!(count = forgotten, "forgot nodes silent for {:?}", self.config.forget_nodes_after);
        }
        Ok(rescued)
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let config = ("rescuer", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(ids) if ids.is_empty() => {}
                Ok(ids) => {
                    ::metrics::counter!(crate::metrics::RESCUED).increment(ids.len() as u64);
                    tracing::warn!(count = ids.len(), ids = ?ids, "rescued abandoned jobs");
                }
                Err(e) => tracing::warn!(error = %e, "rescuer pass failed"),
            }
        })
        .await;
    }
}
