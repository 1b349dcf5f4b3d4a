//! Cron schedules: periodic jobs declared in code (`#[job(cron = "...")]` or
//! [`Periodic`]), fired once per slot by the leader's
//! [`CronEnqueuer`](crate::maintenance::CronEnqueuer).

mod slots;

use chrono::{DateTime, Utc};
use jobs_driver::{
    Driver, JobInsertManyParams, JobState, NewJob, ScheduleDef, ScheduleGetParams, ScheduleRecordRunParams,
    ScheduleRow,
};

pub use slots::{CronExpr, normalize};

use crate::enqueue::Enqueued;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::middleware::InsertChain;
use crate::options::JobOptions;
use crate::registry::{JobDescriptor, MissedPolicy};
use crate::unique::{UniqueBy, UniqueOptions};

/// A periodic job declared when configuring the worker:
/// `Periodic::new::<sales_report>("nightly-sales", "0 3 * * *", ())`.
#[derive(Debug, Clone)]
pub struct Periodic {
    name: String,
    expression: String,
    timezone: String,
    kind: &'static str,
    args: std::result::Result<String, String>,
    options: JobOptions,
    missed: MissedPolicy,
}

impl Periodic {
    /// Enqueues a `J` with `args` at every slot of `expression` (five fields, or six with
    /// seconds first, or `@daily`-style), in UTC unless [`timezone`](Self::timezone) says
    /// otherwise. The name identifies the schedule in the database and the dashboard.
    pub fn new<J: Job>(name: impl Into<String>, expression: impl Into<String>, args: J::Args) -> Periodic {
        Periodic {
            name: name.into(),
            expression: expression.into(),
            timezone: "UTC".into(),
            kind: J::KIND,
            args: serde_json::to_string(&args).map_err(|e| e.to_string()),
            options: J::options(),
            missed: MissedPolicy::Skip,
        }
    }

    /// The schedule declared on a job's attribute, named after the kind.
    pub fn from_descriptor(descriptor: &JobDescriptor) -> Option<Periodic> {
        let cron = descriptor.cron?;
        Some(Periodic {
            name: descriptor.kind.to_owned(),
            expression: cron.expression.to_owned(),
            timezone: cron.timezone.to_owned(),
            kind: descriptor.kind,
            args: (cron.args)().map_err(|e| e.to_string()),
            options: (descriptor.options)(),
            missed: cron.missed,
        })
    }

    /// Evaluates the expression in this IANA zone (e.g. `Europe/Paris`).
    pub fn timezone(mut self, timezone: impl Into<String>) -> Periodic {
        self.timezone = timezone.into();
        self
    }

    /// What to do about slots missed while no node ran.
    pub fn missed(mut self, policy: MissedPolicy) -> Periodic {
        self.missed = policy;
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks the schedule; errors name it.
    pub(crate) fn resolve(&self) -> Result<(ScheduleDef, CronExpr)> {
        let invalid = |reason: String| Error::InvalidSchedule { schedule: self.name.clone(), reason };
        if self.name.trim().is_empty() {
            return Err(invalid("a schedule needs a name".into()));
        }
        let expr = CronExpr::parse(&self.expression, &self.timezone).map_err(invalid)?;
        let args = self.args.clone().map_err(|e| invalid(format!("its arguments do not encode: {e}")))?;
        // A schedule's job is unique by its slot, not by the kind's key: left out, the
        // options are what schedules stored before kinds published theirs (no rewrite).
        let mut options = self.options.to_published();
        if let Some(o) = options.as_object_mut() {
            o.remove("unique");
        }
        let def = ScheduleDef {
            name: self.name.clone(),
            expression: expr.expression().to_owned(),
            timezone: self.timezone.clone(),
            kind: self.kind.to_owned(),
            args,
            options,
            missed_policy: self.missed.as_str().to_owned(),
        };
        Ok((def, expr))
    }
}

/// The job a schedule enqueues. Without a slot, it is a "run now" (its metadata says so).
/// With a `slot`, the job carries a uniqueness key for
/// (schedule, slot) in every state, so a slot can only ever be enqueued once.
pub(crate) fn job_for(row: &ScheduleRow, slot: Option<DateTime<Utc>>) -> NewJob {
    // The kind's options as the schedule stored them (`JobOptions::to_published`); the
    // kind's uniqueness gives way to the slot's.
    let o = JobOptions::from_published(&row.options).unwrap_or_default();
    let queue = o.queue.into_owned();
    let unique = slot.map(|slot| {
        let key = format!("cron:{}:{}", row.name, slot.timestamp_millis());
        let options = UniqueOptions::new(UniqueBy::Key(key.into())).states(JobState::ALL);
        (options.key(&row.kind, &queue, &serde_json::Value::Null, None, 0), JobState::ALL.to_vec())
    });
    let mut meta = serde_json::json!({ "cron": row.name });
    match slot {
        Some(slot) => meta["slot"] = serde_json::json!(slot),
        None => meta["run_now"] = serde_json::json!(true),
    }
    // The kind's partition key, as a typed enqueue would give it (a key that is not a
    // valid one leaves the job unkeyed rather than failing the slot).
    if let Some(by) = &o.partition_by {
        let args: Option<serde_json::Value> = serde_json::from_str(&row.args).ok();
        let key = meta.as_object().and_then(|m| by.key(args.as_ref(), m).ok().flatten());
        match key.filter(|k| jobs_driver::validation::validate_partition_key(k).is_ok()) {
            Some(key) => meta[jobs_driver::partition::PARTITION_META_KEY] = serde_json::json!(key),
            None => tracing::warn!(schedule = %row.name, "the scheduled job has no valid partition key"),
        }
    }
    NewJob {
        kind: row.kind.clone().into(),
        queue: queue.into(),
        args: row.args.clone(),
        meta: meta.to_string().into(),
        tags: o.tags.iter().map(|t| t.to_string()).collect(),
        priority: o.priority,
        max_attempts: o.max_attempts,
        timeout_ms: o.timeout.map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX)),
        run_at: None,
        delay_ms: None,
        unique,
    }
}

/// Enqueues schedule `name`'s job now, outside its slots ("run now" in the dashboard),
/// and records it as the schedule's last run (its job's metadata says `"run_now": true`);
/// the next slot is unchanged. `None` when no such schedule exists.
pub async fn run_now(driver: &dyn Driver, name: &str) -> Result<Option<Enqueued>> {
    let Some(row) = driver.schedule_get(ScheduleGetParams { name }).await? else {
        return Ok(None);
    };
    let mut job = job_for(&row, None);
    let mut chain = InsertChain::current();
    chain.before(std::iter::once(&mut job))?;
    let inserted = chain
        .around(driver.job_insert_many(JobInsertManyParams { jobs: std::slice::from_ref(&job), now: None }))
        .await?;
    chain.after(std::iter::once(&job).zip(&inserted));
    if let Some(enqueued) = inserted.first() {
        driver.schedule_record_run(ScheduleRecordRunParams { name, job_id: enqueued.id, now: None }).await?;
    }
    Ok(inserted.into_iter().next())
}
