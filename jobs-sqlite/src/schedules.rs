//! Cron schedules: the durable record of each schedule's definition, last and next run,
//! and the transaction that fires due slots.

use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncConnectionCore;
use jobs_driver::{Fired, Notification, Result, ScheduleDef, ScheduleRow, SlotDecision};

use crate::jobs::insert::insert_many_async;
use crate::rows::json;
use crate::time::{from_ms_opt, to_ms};

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
    #[diesel(sql_type = Nullable<BigInt>)]
    last_run_at: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    last_job_id: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    next_run_at: Option<i64>,
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
            last_run_at: from_ms_opt(self.last_run_at),
            last_job_id: self.last_job_id,
            next_run_at: from_ms_opt(self.next_run_at),
        })
    }
}

fn into_schedules(rows: Vec<Row>) -> Result<Vec<ScheduleRow>> {
    rows.into_iter().map(Row::into_schedule).collect()
}

const COLUMNS: &str = "name, expression, timezone, kind, args, options, missed_policy, enabled, active, \
                       last_run_at, last_job_id, next_run_at";

// A changed expression or zone forgets the next slot; an unchanged definition is not
// rewritten (the row count says what changed).
const UPSERT: &str = "\
INSERT INTO job_schedules (name, expression, timezone, kind, args, options, missed_policy, active,
                           created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?8)
ON CONFLICT (name) DO UPDATE
SET expression = excluded.expression, timezone = excluded.timezone, kind = excluded.kind,
    args = excluded.args, options = excluded.options, missed_policy = excluded.missed_policy,
    active = 1,
    next_run_at = CASE WHEN job_schedules.expression = excluded.expression
                        AND job_schedules.timezone = excluded.timezone
                       THEN job_schedules.next_run_at END,
    updated_at = excluded.updated_at
WHERE (job_schedules.expression, job_schedules.timezone, job_schedules.kind, job_schedules.args,
       job_schedules.options, job_schedules.missed_policy, job_schedules.active)
      IS NOT (excluded.expression, excluded.timezone, excluded.kind, excluded.args,
              excluded.options, excluded.missed_policy, 1)";

/// See [`jobs_driver::ScheduleSyncParams`]: in the caller's transaction.
pub(crate) fn sync(
    conn: &mut SqliteConnection,
    defs: &[ScheduleDef],
    retire_others: bool,
    now_ms: i64,
) -> Result<i64> {
    let mut changed = 0;
    for def in defs {
        changed += diesel::sql_query(UPSERT)
            .bind::<Text, _>(&def.name)
            .bind::<Text, _>(&def.expression)
            .bind::<Text, _>(&def.timezone)
            .bind::<Text, _>(&def.kind)
            .bind::<Text, _>(&def.args)
            .bind::<Text, _>(def.options.to_string())
            .bind::<Text, _>(&def.missed_policy)
            .bind::<BigInt, _>(now_ms)
            .execute(conn)?;
    }
    if retire_others {
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        changed += diesel::sql_query(
            "UPDATE job_schedules SET active = 0, updated_at = ?2
             WHERE active AND name NOT IN (SELECT value FROM json_each(?1))",
        )
        .bind::<Text, _>(serde_json::Value::from(names).to_string())
        .bind::<BigInt, _>(now_ms)
        .execute(conn)?;
    }
    Ok(changed as i64)
}

/// Records a pass over schedule `name`: the slot that fired and its job (if any), and
/// the next slot.
async fn record_run<C>(
    conn: &mut C,
    name: &str,
    fired: Option<(i64, i64)>,
    next_run_at: Option<i64>,
    now_ms: i64,
) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "UPDATE job_schedules
             SET last_run_at = COALESCE(?2, last_run_at), last_job_id = COALESCE(?3, last_job_id),
                 next_run_at = ?4, updated_at = ?5
             WHERE name = ?1",
        )
        .bind::<Text, _>(name)
        .bind::<Nullable<BigInt>, _>(fired.map(|f| f.0))
        .bind::<Nullable<BigInt>, _>(fired.map(|f| f.1))
        .bind::<Nullable<BigInt>, _>(next_run_at)
        .bind::<BigInt, _>(now_ms),
        conn,
    )
    .await?;
    Ok(())
}

/// Enables or disables schedule `name` (re-enabling forgets the next slot, so no backlog
/// fires). Returns whether it exists.
pub(crate) fn set_enabled(
    conn: &mut SqliteConnection,
    name: &str,
    enabled: bool,
    now_ms: i64,
) -> Result<bool> {
    let n = diesel::sql_query(
        "UPDATE job_schedules
         SET enabled = ?2, next_run_at = CASE WHEN ?2 AND NOT enabled THEN NULL ELSE next_run_at END,
             updated_at = ?3
         WHERE name = ?1",
    )
    .bind::<Text, _>(name)
    .bind::<Bool, _>(enabled)
    .bind::<BigInt, _>(now_ms)
    .execute(conn)?;
    Ok(n > 0)
}

/// Records a run outside the slots: last run and job, next slot untouched.
pub(crate) fn record_manual_run(
    conn: &mut SqliteConnection,
    name: &str,
    job_id: i64,
    now_ms: i64,
) -> Result<bool> {
    let n = diesel::sql_query(
        "UPDATE job_schedules SET last_run_at = ?3, last_job_id = ?2, updated_at = ?3 WHERE name = ?1",
    )
    .bind::<Text, _>(name)
    .bind::<BigInt, _>(job_id)
    .bind::<BigInt, _>(now_ms)
    .execute(conn)?;
    Ok(n > 0)
}

/// Every schedule, by name.
pub(crate) fn list(conn: &mut SqliteConnection) -> Result<Vec<ScheduleRow>> {
    into_schedules(
        diesel::sql_query(format!("SELECT {COLUMNS} FROM job_schedules ORDER BY name")).load(conn)?,
    )
}

/// One schedule.
pub(crate) fn get(conn: &mut SqliteConnection, name: &str) -> Result<Option<ScheduleRow>> {
    let rows: Vec<Row> = diesel::sql_query(format!("SELECT {COLUMNS} FROM job_schedules WHERE name = ?"))
        .bind::<Text, _>(name)
        .load(conn)?;
    Ok(into_schedules(rows)?.into_iter().next())
}

/// See [`jobs_driver::ScheduleFireDueParams`], in the caller's (immediate) transaction,
/// which holds the database's write lock: no other node sees these schedules due until it
/// commits. A job whose slot key exists is not fired again. Returns what fired and the
/// wake-ups the inserts added.
pub(crate) async fn fire_due<C>(
    conn: &mut C,
    now_ms: i64,
    decide: &(dyn Fn(&ScheduleRow) -> SlotDecision + Send + Sync),
) -> Result<(Vec<Fired>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let due: Vec<Row> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(format!(
            "SELECT {COLUMNS} FROM job_schedules
             WHERE enabled AND active AND (next_run_at IS NULL OR next_run_at <= ?) ORDER BY name"
        ))
        .bind::<BigInt, _>(now_ms),
        conn,
    )
    .await?;
    let mut fired = Vec::new();
    let mut wake_ups: Vec<Notification> = Vec::new();
    for row in into_schedules(due)? {
        match decide(&row) {
            SlotDecision::Leave => {}
            SlotDecision::Advance { next } => {
                record_run(conn, &row.name, None, next.map(to_ms), now_ms).await?
            }
            SlotDecision::Fire { slot, job, next } => {
                let (inserted, woken) = insert_many_async(conn, std::slice::from_ref(&*job), now_ms).await?;
                let new = inserted.into_iter().next().filter(|i| !i.existing);
                if let Some(new) = new {
                    fired.push(Fired { schedule: row.name.clone(), slot, job_id: new.id });
                }
                for wake_up in woken {
                    if !wake_ups.contains(&wake_up) {
                        wake_ups.push(wake_up);
                    }
                }
                record_run(conn, &row.name, new.map(|n| (to_ms(slot), n.id)), next.map(to_ms), now_ms)
                    .await?;
            }
        }
    }
    Ok((fired, wake_ups))
}
