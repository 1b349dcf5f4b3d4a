//! The cron enqueuer: fires each schedule's slots, once per slot across all nodes.
//!
//! Each pass first writes the schedules declared in code to `job_schedules`, then, in one
//! transaction, locks the due schedules (`FOR UPDATE SKIP LOCKED`), enqueues one job per
//! schedule, and records the slot that fired and the next one. A uniqueness key per
//! (schedule, slot), unique in every state, means two nodes racing through the same slot
//! insert one job between them. After downtime, at most one job per schedule is enqueued:
//! the latest missed slot under `run_latest`, none under `skip`.

use std::collections::HashMap;
use std::time::Duration;

use diesel_async::AsyncConnection;
use tokio_util::sync::CancellationToken;

use super::{ServiceContext, leader_loop};
use crate::cron::{CronExpr, Periodic, job_for};
use crate::db;
use crate::db::schedules::ScheduleDef;
use crate::error::{Error, Result};
use crate::registry::MissedPolicy;

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

/// One slot a pass fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The schedule.
    pub schedule: String,
    /// The slot's time.
    pub slot: chrono::DateTime<chrono::Utc>,
    /// The job enqueued for it.
    pub job_id: i64,
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

    fn expr_for(&self, row: &db::schedules::ScheduleRow) -> std::result::Result<CronExpr, String> {
        match self.exprs.get(&row.name) {
            Some(expr) if expr.expression() == row.expression => Ok(expr.clone()),
            _ => CronExpr::parse(&row.expression, &row.timezone),
        }
    }

    /// One pass: syncs the declared schedules, then fires every due slot. Returns what
    /// fired.
    pub async fn run_once(&self, ctx: &ServiceContext) -> Result<Vec<Fired>> {
        let mut conn = ctx.pool.get().await?;
        db::schedules::sync(&mut conn, &self.defs, self.config.retire_undeclared).await?;
        let now = ctx.clock.now();
        let db_now = ctx.clock.db_now();
        let grace = chrono::Duration::from_std(self.config.grace).unwrap_or(chrono::Duration::MAX);
        conn.transaction(async |tx| {
            let due = db::schedules::lock_due(tx, db_now).await?;
            let mut fired = Vec::new();
            for row in due {
                let expr = match self.expr_for(&row) {
                    Ok(expr) => expr,
                    Err(reason) => {
                        tracing::error!(schedule = %row.name, %reason, "skipping a schedule that does not parse");
                        continue;
                    }
                };
                let Some(first_due) = row.next_run_at else {
                    // New (or re-enabled, or changed): start from the next slot.
                    db::schedules::record_run(tx, &row.name, None, expr.next_after(now)).await?;
                    continue;
                };
                let (latest, slots) = expr.latest_due(first_due, now, 100_000);
                let policy = MissedPolicy::parse(&row.missed_policy).unwrap_or_default();
                let slot = latest.filter(|latest| match policy {
                    MissedPolicy::RunLatest => true,
                    MissedPolicy::Skip => now - *latest <= grace,
                });
                if slots > 1 || slot.is_none() {
                    tracing::info!(schedule = %row.name, slots, fired = slot.is_some(), ?policy, "slots were missed");
                }
                let mut fired_slot = None;
                if let Some(slot) = slot {
                    let job = job_for(&row, Some(slot));
                    let inserted = db::jobs::insert_many(tx, std::slice::from_ref(&job), db_now).await?;
                    if let Some(inserted) = inserted.into_iter().next().filter(|i| !i.existing) {
                        fired_slot = Some((slot, inserted.id));
                        fired.push(Fired { schedule: row.name.clone(), slot, job_id: inserted.id });
                    }
                }
                db::schedules::record_run(tx, &row.name, fired_slot, expr.next_after(now)).await?;
            }
            Ok::<_, Error>(fired)
        })
        .await
    }

    /// Runs every interval while the node leads, until `stop` fires.
    pub async fn run(self, ctx: ServiceContext, stop: CancellationToken) {
        leader_loop(&ctx, self.config.interval, &stop, || async {
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
