//! The cron enqueuer: fires each schedule's slots, once per slot across all nodes.
//!
//! Each pass first writes the schedules declared in code (`schedule_sync`), then, in one
//! transaction of the driver's (`schedule_fire_due`), locks the due schedules (skipping
//! those another node holds), enqueues one job per schedule as [`CronEnqueuer::decide`]
//! says, and records the slot that fired and the next one. A uniqueness key per
//! (schedule, slot), unique in every state, means two nodes racing through the same slot
//! insert one job between them. After downtime, at most one job per schedule is enqueued:
//! the latest missed slot under `run_latest`, none under `skip`.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_driver::{ScheduleDef, ScheduleFireDueParams, ScheduleRow, ScheduleSyncParams, SlotDecision};
use tokio_util::sync::CancellationToken;

pub use jobs_driver::Fired;

use super::service_context::{ServiceContext, leader_loop};
use crate::cron::{CronExpr, Periodic, job_for};
use crate::error::{Error, Result};
use crate::middleware::InsertChain;
use crate::registry::MissedPolicy;
use crate::settings;

/// Settings of the [`CronEnqueuer`].
#[derive(Debug, Clone)]
pub struct CronConfig {
    /// How often to look for due slots.
    pub interval: Duration,
    /// A slot fired later than this after its time counts as missed (see the policy).
    pub grace: Duration,
    /// Mark schedules no longer declared by this node's code inactive.
    pub retire_undeclared: bool,
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            interval: Duration::from_secs(1),
            grace: Duration::from_secs(60),
            retire_undeclared: true,
        }
    }
}

impl CronConfig {
    /// Checks the settings: a positive interval, a grace of at most a week.
    pub fn validate(&self) -> Result<()> {
        settings::period("cron.interval", self.interval)?;
        settings::at_most_max_period("cron.grace", self.grace)
    }
}

/// Fires cron schedules.
#[derive(Debug, Clone)]
pub struct CronEnqueuer {
    config: CronConfig,
    defs: Vec<ScheduleDef>,
    exprs: HashMap<String, CronExpr>,
}

impl CronEnqueuer {
    /// An enqueuer for `schedules`. Fails on an invalid expression or zone, or on two
    /// schedules with one name, naming the schedule.
    pub fn new(config: CronConfig, schedules: &[Periodic]) -> Result<CronEnqueuer> {
        let mut defs = Vec::with_capacity(schedules.len());
        let mut exprs = HashMap::new();
        for schedule in schedules {
            let (def, expr) = schedule.resolve()?;
            if exprs.insert(def.name.clone(), expr).is_some() {
                return Err(Error::InvalidSchedule {
                    schedule: def.name,
                    reason: "two schedules have this name".into(),
                });
            }
            defs.push(def);
        }
        Ok(CronEnqueuer { config, defs, exprs })
    }

    /// Whether any schedule is declared.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    fn expr_for(&self, row: &ScheduleRow) -> std::result::Result<CronExpr, String> {
        match self.exprs.get(&row.name) {
            Some(expr) if expr.expression() == row.expression => Ok(expr.clone()),
            _ => CronExpr::parse(&row.expression, &row.timezone),
        }
    }

    /// What to do with due schedule `row` at `now`: a new (or re-enabled, or changed)
    /// schedule starts from its next slot; otherwise the latest slot that has come fires,
    /// unless it was missed by more than the grace under the `skip` policy. Either way the
    /// next slot is recorded. A schedule whose expression no longer parses is left alone.
    pub fn decide(&self, row: &ScheduleRow, now: DateTime<Utc>) -> SlotDecision {
        let expr = match self.expr_for(row) {
            Ok(expr) => expr,
            Err(reason) => {
                tracing::error!(schedule = %row.name, %reason, "skipping a schedule that does not parse");
                return SlotDecision::Leave;
            }
        };
        let next = expr.next_after(now);
        let Some(first_due) = row.next_run_at else {
            return SlotDecision::Advance { next };
        };
        let grace = chrono::Duration::from_std(self.config.grace).unwrap_or(chrono::Duration::MAX);
        let (latest, slots) = expr.latest_due(first_due, now, 100_000);
        let policy = MissedPolicy::parse(&row.missed_policy).unwrap_or_default();
        let slot = latest.filter(|latest| match policy {
            MissedPolicy::RunLatest => true,
            MissedPolicy::Skip => now - *latest <= grace,
        });
        if slots > 1 || slot.is_none() {
            tracing::info!(schedule = %row.name, slots, fired = slot.is_some(), ?policy, "slots were missed");
        }
        let Some(slot) = slot else { return SlotDecision::Advance { next } };
        let mut job = job_for(row, Some(slot));
        // The insert middleware sees the slot's job as it sees every enqueue; a refusal
        // skips the slot (retried, it would be refused at every pass).
        if let Err(e) = InsertChain::current().before(std::iter::once(&mut job)) {
            tracing::warn!(schedule = %row.name, %slot, error = %e, "a cron slot's job was refused by insert middleware: the slot is skipped");
            return SlotDecision::Advance { next };
        }
        SlotDecision::Fire { slot, job: Box::new(job), next }
    }

    /// One pass: syncs the declared schedules, then fires every due slot. Returns what
    /// fired.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<Vec<Fired>> {
        self.config.validate()?;
        let sync = ScheduleSyncParams { defs: &self.defs, retire_others: self.config.retire_undeclared };
        ctx.driver.schedule_sync(sync).await?;
        let now = ctx.clock.now();
        let decide = |row: &ScheduleRow| self.decide(row, now);
        Ok(ctx
            .driver
            .schedule_fire_due(ScheduleFireDueParams { now: ctx.clock.db_now(), decide: &decide })
            .await?)
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        let config = ("cron", self.config.validate());
        leader_loop(&ctx, config, self.config.interval, &stop, || async {
            match self.run_once(&ctx).await {
                Ok(fired) => {
                    for f in fired {
                        tracing::info!(schedule = %f.schedule, slot = %f.slot, job.id = f.job_id, "cron slot fired");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cron pass failed"),
            }
        })
        .await;
    }
}
