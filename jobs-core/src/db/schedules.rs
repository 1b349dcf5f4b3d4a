//! Cron schedules: the durable record of each schedule's definition, last and next run.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::error::Result;

/// A schedule as declared in code, to be written to `job_schedules`.
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
    /// Insert options: `{"queue", "priority", "max_attempts", "timeout_ms", "tags"}`.
    pub options: serde_json::Value,
    /// `skip` or `run_latest`.
    pub missed_policy: String,
}

/// A row of `job_schedules`.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
pub struct ScheduleRow {
    /// Unique name.
    #[diesel(sql_type = Text)]
    pub name: String,
    /// The cron expression.
    #[diesel(sql_type = Text)]
    pub expression: String,
    /// IANA zone.
    #[diesel(sql_type = Text)]
    pub timezone: String,
    /// Job kind.
    #[diesel(sql_type = Text)]
    pub kind: String,
    /// Arguments as JSON text.
    #[diesel(sql_type = Text)]
    pub args: String,
    /// Insert options.
    #[diesel(sql_type = Jsonb)]
    pub options: serde_json::Value,
    /// `skip` or `run_latest`.
    #[diesel(sql_type = Text)]
    pub missed_policy: String,
    /// Switched by people: a disabled schedule does not fire.
    #[diesel(sql_type = Bool)]
    pub enabled: bool,
    /// False once no running node declares the schedule.
    #[diesel(sql_type = Bool)]
    pub active: bool,
    /// The latest slot that fired.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub last_run_at: Option<DateTime<Utc>>,
    /// The job it enqueued.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub last_job_id: Option<i64>,
    /// The next slot.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub next_run_at: Option<DateTime<Utc>>,
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

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Writes the schedules declared in code: new ones are created, changed ones updated (a
/// changed expression or zone recomputes the next slot), and — when `retire_others` —
/// schedules no longer declared are marked inactive (kept for the record, never fired).
/// The enabled flag, set by people, is left alone. Returns how many rows changed.
pub async fn sync<C>(conn: &mut C, defs: &[ScheduleDef], retire_others: bool) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
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
pub async fn lock_due<C>(conn: &mut C, now: Option<DateTime<Utc>>) -> Result<Vec<ScheduleRow>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM job_schedules
         WHERE enabled AND active AND (next_run_at IS NULL OR next_run_at <= COALESCE($1::timestamptz, now()))
         ORDER BY name FOR UPDATE SKIP LOCKED"
    ))
    .bind::<Nullable<Timestamptz>, _>(now)
    .load(conn)
    .await?)
}

/// Records a pass over schedule `name`: the slot that fired and its job (if any), and
/// the next slot.
pub async fn record_run<C>(
    conn: &mut C,
    name: &str,
    fired: Option<(DateTime<Utc>, i64)>,
    next_run_at: Option<DateTime<Utc>>,
) -> Result<()>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
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

/// Enables or disables schedule `name`. Returns whether it exists.
pub async fn set_enabled<C>(conn: &mut C, name: &str, enabled: bool) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
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
pub async fn list<C>(conn: &mut C) -> Result<Vec<ScheduleRow>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(diesel::sql_query(format!("SELECT {COLUMNS} FROM job_schedules ORDER BY name")).load(conn).await?)
}

/// One schedule.
pub async fn get<C>(conn: &mut C, name: &str) -> Result<Option<ScheduleRow>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let rows: Vec<ScheduleRow> =
        diesel::sql_query(format!("SELECT {COLUMNS} FROM job_schedules WHERE name = $1"))
            .bind::<Text, _>(name)
            .load(conn)
            .await?;
    Ok(rows.into_iter().next())
}
