//! Cron schedules: the durable record of each schedule's definition, last and next run,
//! and the transaction that fires due slots.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Bool, Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncConnectionCore, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{
    DriverError, Fired, Notification, Result, ScheduleDef, ScheduleFireDueParams, ScheduleRow,
    ScheduleSyncParams, SlotDecision,
};

use crate::cached::CachedQuery;
use crate::jobs::insert::insert_many;
use crate::rows::json;
use crate::time::{naive, naive_opt, utc};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    expression: String,
    #[diesel(sql_type = Text)]
    timezone: String,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    args: String,
    #[diesel(sql_type = Text)]
    options: String,
    #[diesel(sql_type = Text)]
    missed_policy: String,
    #[diesel(sql_type = Bool)]
    enabled: bool,
    #[diesel(sql_type = Bool)]
    active: bool,
    #[diesel(sql_type = Nullable<Datetime>)]
    last_run_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<BigInt>)]
    last_job_id: Option<i64>,
    #[diesel(sql_type = Nullable<Datetime>)]
    next_run_at: Option<NaiveDateTime>,
}

impl Row {
    fn into_schedule(self) -> Result<ScheduleRow> {
        Ok(ScheduleRow {
            options: json("options", &self.options)?,
            name: self.name,
            expression: self.expression,
            timezone: self.timezone,
            kind: self.kind,
            args: self.args,
            missed_policy: self.missed_policy,
            enabled: self.enabled,
            active: self.active,
            last_run_at: self.last_run_at.map(utc),
            last_job_id: self.last_job_id,
            next_run_at: self.next_run_at.map(utc),
        })
    }
}

fn into_schedules(rows: Vec<Row>) -> Result<Vec<ScheduleRow>> {
    rows.into_iter().map(Row::into_schedule).collect()
}

/// The columns a [`Row`] reads (a macro, for `concat!`).
macro_rules! columns {
    () => {
        "name, expression, timezone, kind, args, options, missed_policy, enabled, active, last_run_at, \
         last_job_id, next_run_at"
    };
}

/// Whether the stored definition differs from the one being written (`$2` to `$7`; not
/// `VALUES(…)`, which MySQL deprecates).
macro_rules! changed {
    () => {
        "NOT (expression <=> $2 AND timezone <=> $3 AND kind <=> $4 AND args <=> $5 AND options <=> $6
              AND missed_policy <=> $7 AND active)"
    };
}

// A changed expression or zone forgets the next slot; an unchanged definition is not
// rewritten (the row count says what changed). MySQL applies the assignments in order,
// each seeing the ones before: those that compare old and new values come first.
const UPSERT: &str = concat!(
    "\
INSERT INTO job_schedules (name, expression, timezone, kind, args, options, missed_policy, active,
                           created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, TRUE, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
    updated_at = IF(",
    changed!(),
    ", UTC_TIMESTAMP(6), updated_at),
    next_run_at = IF(expression <=> $2 AND timezone <=> $3, next_run_at, NULL),
    expression = $2, timezone = $3, kind = $4, args = $5, options = $6, missed_policy = $7, active = TRUE"
);

/// See [`ScheduleSyncParams`], in one transaction.
pub(crate) async fn sync(conn: &mut AsyncMysqlConnection, params: ScheduleSyncParams<'_>) -> Result<i64> {
    conn.transaction::<_, DriverError, _>(async |tx| {
        {
            let mut changed = 0;
            for def in params.defs {
                changed += i64::from(upsert(tx, def).await? > 0);
            }
            if params.retire_others {
                let names: Vec<&str> = params.defs.iter().map(|d| d.name.as_str()).collect();
                changed += CachedQuery::new(
                    "UPDATE job_schedules SET active = FALSE, updated_at = UTC_TIMESTAMP(6)
                     WHERE active AND name NOT IN (
                         SELECT n.name FROM JSON_TABLE($1, '$[*]' COLUMNS (name VARCHAR(255) PATH '$')) AS n)",
                )
                .bind::<Text, _>(serde_json::Value::from(names).to_string())
                .execute(tx)
                .await? as i64;
            }
            Ok(changed)
        }
    })
    .await
}

async fn upsert(conn: &mut AsyncMysqlConnection, def: &ScheduleDef) -> Result<usize> {
    Ok(CachedQuery::new(UPSERT)
        .bind::<Text, _>(&def.name)
        .bind::<Text, _>(&def.expression)
        .bind::<Text, _>(&def.timezone)
        .bind::<Text, _>(&def.kind)
        .bind::<Text, _>(&def.args)
        .bind::<Text, _>(def.options.to_string())
        .bind::<Text, _>(&def.missed_policy)
        .execute(conn)
        .await?)
}

/// Records a pass over schedule `name`: the slot that fired and its job (if any), and
/// the next slot.
async fn record_run<C>(
    conn: &mut C,
    name: &str,
    fired: Option<(NaiveDateTime, i64)>,
    next_run_at: Option<NaiveDateTime>,
) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    CachedQuery::new(
        "UPDATE job_schedules
         SET last_run_at = COALESCE($2, last_run_at), last_job_id = COALESCE($3, last_job_id),
             next_run_at = $4, updated_at = UTC_TIMESTAMP(6)
         WHERE name = $1",
    )
    .bind::<Text, _>(name)
    .bind::<Nullable<Datetime>, _>(fired.map(|f| f.0))
    .bind::<Nullable<BigInt>, _>(fired.map(|f| f.1))
    .bind::<Nullable<Datetime>, _>(next_run_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Enables or disables schedule `name` (re-enabling forgets the next slot, so no backlog
/// fires). Returns whether it exists.
pub(crate) async fn set_enabled(conn: &mut AsyncMysqlConnection, name: &str, enabled: bool) -> Result<bool> {
    if !exists(conn, name).await? {
        return Ok(false);
    }
    CachedQuery::new(
        "UPDATE job_schedules
         SET next_run_at = IF($2 AND NOT enabled, NULL, next_run_at), enabled = $2, updated_at = UTC_TIMESTAMP(6)
         WHERE name = $1",
    )
    .bind::<Text, _>(name)
    .bind::<Bool, _>(enabled)
    .execute(conn)
    .await?;
    Ok(true)
}

/// Whether schedule `name` exists. (MariaDB counts changed rows, not matched ones, so an
/// update cannot tell a missing schedule from one already as asked.)
async fn exists(conn: &mut AsyncMysqlConnection, name: &str) -> Result<bool> {
    let found: Vec<crate::rows::Name> = CachedQuery::new("SELECT name FROM job_schedules WHERE name = $1")
        .bind::<Text, _>(name)
        .load(conn)
        .await?;
    Ok(!found.is_empty())
}

/// Records a run outside the slots: last run and job, next slot untouched.
pub(crate) async fn record_manual_run(
    conn: &mut AsyncMysqlConnection,
    params: jobs_driver::ScheduleRecordRunParams<'_>,
) -> Result<bool> {
    if !exists(conn, params.name).await? {
        return Ok(false);
    }
    CachedQuery::new(
        "UPDATE job_schedules
         SET last_run_at = COALESCE($3, UTC_TIMESTAMP(6)), last_job_id = $2, updated_at = UTC_TIMESTAMP(6)
         WHERE name = $1",
    )
    .bind::<Text, _>(params.name)
    .bind::<BigInt, _>(params.job_id)
    .bind::<Nullable<Datetime>, _>(params.now.map(|t| t.naive_utc()))
    .execute(conn)
    .await?;
    Ok(true)
}

/// Every schedule, by name.
pub(crate) async fn list(conn: &mut AsyncMysqlConnection) -> Result<Vec<ScheduleRow>> {
    into_schedules(
        CachedQuery::new(concat!("SELECT ", columns!(), " FROM job_schedules ORDER BY name"))
            .load(conn)
            .await?,
    )
}

/// One schedule.
pub(crate) async fn get(conn: &mut AsyncMysqlConnection, name: &str) -> Result<Option<ScheduleRow>> {
    let rows: Vec<Row> =
        CachedQuery::new(concat!("SELECT ", columns!(), " FROM job_schedules WHERE name = $1"))
            .bind::<Text, _>(name)
            .load(conn)
            .await?;
    Ok(into_schedules(rows)?.into_iter().next())
}

/// See [`ScheduleFireDueParams`]: one transaction locks the due schedules, skipping those
/// another node holds, and fires them. A job whose slot key exists is not fired again.
/// Returns what fired and the wake-ups the inserts added.
pub(crate) async fn fire_due(
    conn: &mut AsyncMysqlConnection,
    params: ScheduleFireDueParams<'_>,
) -> Result<(Vec<Fired>, Vec<Notification>)> {
    let now = params.now;
    let decide = params.decide;
    conn.transaction::<_, DriverError, _>(async |tx| {
        {
            let due: Vec<Row> = CachedQuery::new(concat!(
                "SELECT ",
                columns!(),
                " FROM job_schedules
                 WHERE enabled AND active AND (next_run_at IS NULL OR next_run_at <= COALESCE($1, UTC_TIMESTAMP(6)))
                 ORDER BY name
                 FOR UPDATE SKIP LOCKED"
            ))
            .bind::<Nullable<Datetime>, _>(naive_opt(now))
            .load(tx)
            .await?;
            let mut fired = Vec::new();
            let mut wake_ups: Vec<Notification> = Vec::new();
            for row in into_schedules(due)? {
                match decide(&row) {
                    SlotDecision::Leave => {}
                    SlotDecision::Advance { next } => record_run(tx, &row.name, None, next.map(naive)).await?,
                    SlotDecision::Fire { slot, job, next } => {
                        let (inserted, woken) = insert_many(tx, std::slice::from_ref(&*job), now).await?;
                        let new = inserted.into_iter().next().filter(|i| !i.existing);
                        if let Some(new) = new {
                            fired.push(Fired { schedule: row.name.clone(), slot, job_id: new.id });
                        }
                        for wake_up in woken {
                            if !wake_ups.contains(&wake_up) {
                                wake_ups.push(wake_up);
                            }
                        }
                        record_run(tx, &row.name, new.map(|n| (naive(slot), n.id)), next.map(naive)).await?;
                    }
                }
            }
            Ok((fired, wake_ups))
        }
    })
    .await
}
