//! Cron schedules: the durable record of each schedule's definition, last and next run,
//! and the transaction that fires due slots.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncConnectionCore, RunQueryDsl, TransactionManager};
use jobs_driver::{
    Fired, Result, ScheduleDef, ScheduleFireDueParams, ScheduleRecordRunParams, ScheduleRow,
    ScheduleSyncParams, SlotDecision,
};

use crate::jobs::insert::insert_many;
use crate::rows::Count;

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
    #[diesel(sql_type = Jsonb)]
    options: serde_json::Value,
    #[diesel(sql_type = Text)]
    missed_policy: String,
    #[diesel(sql_type = Bool)]
    enabled: bool,
    #[diesel(sql_type = Bool)]
    active: bool,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    last_run_at: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<BigInt>)]
    last_job_id: Option<i64>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    next_run_at: Option<DateTime<Utc>>,
}

impl From<Row> for ScheduleRow {
    fn from(r: Row) -> ScheduleRow {
        ScheduleRow {
            name: r.name,
            expression: r.expression,
            timezone: r.timezone,
            kind: r.kind,
            args: r.args,
            options: r.options,
            missed_policy: r.missed_policy,
            enabled: r.enabled,
            active: r.active,
            last_run_at: r.last_run_at,
            last_job_id: r.last_job_id,
            next_run_at: r.next_run_at,
        }
    }
}

const COLUMNS: &str = "name, expression, timezone, kind, args::text AS args, options, missed_policy, enabled, \
                       active, last_run_at, last_job_id, next_run_at";

const SYNC: &str = "\
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
        AS i(name, expression, timezone, kind, args, options, missed_policy)
), upserted AS (
    INSERT INTO job_schedules AS s (name, expression, timezone, kind, args, options, missed_policy, active)
    SELECT name, expression, timezone, kind, args::jsonb, options::jsonb, missed_policy, true FROM input
    ON CONFLICT (name) DO UPDATE
    SET expression = EXCLUDED.expression, timezone = EXCLUDED.timezone, kind = EXCLUDED.kind,
        args = EXCLUDED.args, options = EXCLUDED.options, missed_policy = EXCLUDED.missed_policy,
        active = true,
        next_run_at = CASE WHEN s.expression = EXCLUDED.expression AND s.timezone = EXCLUDED.timezone
                           THEN s.next_run_at END,
        updated_at = now()
    WHERE (s.expression, s.timezone, s.kind, s.args, s.options, s.missed_policy, s.active)
          IS DISTINCT FROM (EXCLUDED.expression, EXCLUDED.timezone, EXCLUDED.kind, EXCLUDED.args,
                            EXCLUDED.options, EXCLUDED.missed_policy, true)
    RETURNING 1
), retired AS (
    UPDATE job_schedules SET active = false, updated_at = now()
    WHERE active AND name <> ALL ($1::text[]) AND $8
    RETURNING 1
)
SELECT (SELECT count(*) FROM upserted) + (SELECT count(*) FROM retired) AS n";

/// See [`ScheduleSyncParams`].
pub(crate) async fn sync<C>(conn: &mut C, params: ScheduleSyncParams<'_>) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let ScheduleSyncParams { defs, retire_others } = params;
    let col = |f: fn(&ScheduleDef) -> String| defs.iter().map(f).collect::<Vec<String>>();
    let row: Count = diesel::sql_query(SYNC)
        .bind::<Array<Text>, _>(col(|d| d.name.clone()))
        .bind::<Array<Text>, _>(col(|d| d.expression.clone()))
        .bind::<Array<Text>, _>(col(|d| d.timezone.clone()))
        .bind::<Array<Text>, _>(col(|d| d.kind.clone()))
        .bind::<Array<Text>, _>(col(|d| d.args.clone()))
        .bind::<Array<Text>, _>(col(|d| d.options.to_string()))
        .bind::<Array<Text>, _>(col(|d| d.missed_policy.clone()))
        .bind::<Bool, _>(retire_others)
        .get_result(conn)
        .await?;
    Ok(row.n)
}

/// Locks the enabled, active schedules whose next slot has come (or was never computed),
/// skipping those another node holds. Call inside a transaction.
async fn lock_due<C>(conn: &mut C, now: Option<DateTime<Utc>>) -> Result<Vec<ScheduleRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Row> = diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM job_schedules
         WHERE enabled AND active AND (next_run_at IS NULL OR next_run_at <= COALESCE($1::timestamptz, now()))
         ORDER BY name FOR UPDATE SKIP LOCKED"
    ))
    .bind::<Nullable<Timestamptz>, _>(now)
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(ScheduleRow::from).collect())
}

/// Records a pass over schedule `name`: the slot that fired and its job (if any), and
/// the next slot.
async fn record_run<C>(
    conn: &mut C,
    name: &str,
    fired: Option<(DateTime<Utc>, i64)>,
    next_run_at: Option<DateTime<Utc>>,
) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    diesel::sql_query(
        "UPDATE job_schedules
         SET last_run_at = COALESCE($2, last_run_at), last_job_id = COALESCE($3, last_job_id),
             next_run_at = $4, updated_at = now()
         WHERE name = $1",
    )
    .bind::<Text, _>(name)
    .bind::<Nullable<Timestamptz>, _>(fired.map(|f| f.0))
    .bind::<Nullable<BigInt>, _>(fired.map(|f| f.1))
    .bind::<Nullable<Timestamptz>, _>(next_run_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records a run outside the slots (see [`ScheduleRecordRunParams`]).
pub(crate) async fn record_manual_run<C>(conn: &mut C, params: ScheduleRecordRunParams<'_>) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let n = diesel::sql_query(
        "UPDATE job_schedules SET last_run_at = COALESCE($3, now()), last_job_id = $2, updated_at = now()
         WHERE name = $1",
    )
    .bind::<Text, _>(params.name)
    .bind::<BigInt, _>(params.job_id)
    .bind::<Nullable<Timestamptz>, _>(params.now)
    .execute(conn)
    .await?;
    Ok(n > 0)
}

/// Enables or disables schedule `name`. Returns whether it exists.
pub(crate) async fn set_enabled<C>(conn: &mut C, name: &str, enabled: bool) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    // Re-enabling recomputes the next slot from now, so no backlog fires.
    let n = diesel::sql_query(
        "UPDATE job_schedules
         SET enabled = $2, next_run_at = CASE WHEN $2 AND NOT enabled THEN NULL ELSE next_run_at END,
             updated_at = now()
         WHERE name = $1",
    )
    .bind::<Text, _>(name)
    .bind::<Bool, _>(enabled)
    .execute(conn)
    .await?;
    Ok(n > 0)
}

/// Every schedule, by name.
pub(crate) async fn list<C>(conn: &mut C) -> Result<Vec<ScheduleRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Row> =
        diesel::sql_query(format!("SELECT {COLUMNS} FROM job_schedules ORDER BY name")).load(conn).await?;
    Ok(rows.into_iter().map(ScheduleRow::from).collect())
}

/// One schedule.
pub(crate) async fn get<C>(conn: &mut C, name: &str) -> Result<Option<ScheduleRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Row> = diesel::sql_query(format!("SELECT {COLUMNS} FROM job_schedules WHERE name = $1"))
        .bind::<Text, _>(name)
        .load(conn)
        .await?;
    Ok(rows.into_iter().next().map(ScheduleRow::from))
}

/// See [`ScheduleFireDueParams`]: one transaction locks the due schedules, inserts the jobs
/// `decide` fires (the slot's uniqueness key in every state makes a second insert of one
/// slot come back as existing, so it is not counted as fired) and records each pass.
pub(crate) async fn fire_due<C>(conn: &mut C, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>>
where
    C: AsyncConnection<Backend = Pg> + Send,
{
    type Manager<C> = <C as AsyncConnection>::TransactionManager;
    Manager::<C>::begin_transaction(conn).await?;
    match fire_locked(conn, params).await {
        Ok(fired) => {
            Manager::<C>::commit_transaction(conn).await?;
            Ok(fired)
        }
        Err(e) => {
            if let Err(rollback) = Manager::<C>::rollback_transaction(conn).await {
                tracing::warn!(error = %rollback, "rolling back a failed cron pass failed");
            }
            Err(e)
        }
    }
}

async fn fire_locked<C>(conn: &mut C, params: ScheduleFireDueParams<'_>) -> Result<Vec<Fired>>
where
    C: AsyncConnection<Backend = Pg> + Send,
{
    let ScheduleFireDueParams { now, decide } = params;
    let mut fired = Vec::new();
    for row in lock_due(conn, now).await? {
        match decide(&row) {
            SlotDecision::Leave => {}
            SlotDecision::Advance { next } => record_run(conn, &row.name, None, next).await?,
            SlotDecision::Fire { slot, job, next } => {
                let inserted = insert_many(conn, std::slice::from_ref(&job), now).await?;
                let new = inserted.into_iter().next().filter(|i| !i.existing);
                if let Some(new) = new {
                    fired.push(Fired { schedule: row.name.clone(), slot, job_id: new.id });
                }
                record_run(conn, &row.name, new.map(|n| (slot, n.id)), next).await?;
            }
        }
    }
    Ok(fired)
}
