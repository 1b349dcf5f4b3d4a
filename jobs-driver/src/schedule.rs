//! Cron schedules: the durable record of each schedule's definition, last and next run,
//! and the one transaction that fires due slots.

use chrono::{DateTime, Utc};

use crate::job::NewJob;

/// A schedule as declared in code, to be written by `schedule_sync`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleDef {
    /// Unique name.
    pub name: String,
    /// The normalized cron expression.
    pub expression: String,
    /// IANA zone.
    pub timezone: String,
    /// Job kind to enqueue.
    pub kind: String,
    /// Arguments, as JSON text.
    pub args: String,
    /// Insert options, as `jobs_core::JobOptions::to_published` writes them (`{"queue",
    /// "priority", "max_attempts", "timeout_ms", "tags", "unique"}`; a job of the schedule
    /// is unique by its slot instead).
    pub options: serde_json::Value,
    /// `skip` or `run_latest`.
    pub missed_policy: String,
}

/// A stored schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleRow {
    /// Unique name.
    pub name: String,
    /// The cron expression.
    pub expression: String,
    /// IANA zone.
    pub timezone: String,
    /// Job kind.
    pub kind: String,
    /// Arguments as JSON text.
    pub args: String,
    /// Insert options.
    pub options: serde_json::Value,
    /// `skip` or `run_latest`.
    pub missed_policy: String,
    /// Switched by people: a disabled schedule does not fire.
    pub enabled: bool,
    /// False once no running node declares the schedule.
    pub active: bool,
    /// The latest slot that fired.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The job it enqueued.
    pub last_job_id: Option<i64>,
    /// The next slot.
    pub next_run_at: Option<DateTime<Utc>>,
}

/// What to do with one due schedule, decided by the engine from its cron expression.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotDecision {
    /// Leave the schedule untouched (its expression does not parse).
    Leave,
    /// Record `next` as the next slot without firing (a new, re-enabled or changed
    /// schedule, or a slot missed under the `skip` policy).
    Advance {
        /// The next slot.
        next: Option<DateTime<Utc>>,
    },
    /// Insert `job` for `slot` (its uniqueness key is the slot's, in every state), then
    /// record the slot, the job and `next`.
    Fire {
        /// The slot's time.
        slot: DateTime<Utc>,
        /// The job to insert.
        job: Box<NewJob>,
        /// The next slot.
        next: Option<DateTime<Utc>>,
    },
}

/// One slot a pass fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The schedule.
    pub schedule: String,
    /// The slot's time.
    pub slot: DateTime<Utc>,
    /// The job enqueued for it.
    pub job_id: i64,
}

/// `schedule_sync`: write the schedules declared in code. New ones are created, changed
/// ones updated (a changed expression or zone forgets the next slot), and when
/// `retire_others`, schedules no longer declared are marked inactive. The enabled flag,
/// set by people, is left alone. Returns how many rows changed.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleSyncParams<'a> {
    /// The declared schedules.
    pub defs: &'a [ScheduleDef],
    /// Retire the schedules not in `defs`.
    pub retire_others: bool,
}

/// `schedule_fire_due`: in one transaction, lock the enabled, active schedules whose next
/// slot has come (or was never computed), skipping those another node holds; ask
/// `decide` what to do with each; insert the jobs it fires (a job whose slot key exists
/// is not fired again); record each schedule's slot and next slot. Returns what fired.
#[derive(Clone, Copy)]
pub struct ScheduleFireDueParams<'a> {
    /// Now, for the due check and the inserts.
    pub now: Option<DateTime<Utc>>,
    /// The engine's decision for one due schedule.
    pub decide: &'a (dyn Fn(&ScheduleRow) -> SlotDecision + Send + Sync),
}

impl std::fmt::Debug for ScheduleFireDueParams<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleFireDueParams").field("now", &self.now).finish_non_exhaustive()
    }
}

/// `schedule_set_enabled`: enable or disable schedule `name`; re-enabling forgets the
/// next slot so that no backlog fires. Returns whether it exists.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleSetEnabledParams<'a> {
    /// The schedule.
    pub name: &'a str,
    /// Enabled or not.
    pub enabled: bool,
}

/// `schedule_record_run`: records that schedule `name` enqueued `job_id` outside its
/// slots ("run now"), as its last run, without moving its next slot. Returns whether the
/// schedule exists.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleRecordRunParams<'a> {
    /// The schedule.
    pub name: &'a str,
    /// The job it enqueued.
    pub job_id: i64,
    /// When (the database's clock when `None`).
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// `schedule_get`: one schedule.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleGetParams<'a> {
    /// The schedule.
    pub name: &'a str,
}

/// `schedule_list`: every schedule, by name.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScheduleListParams {}
