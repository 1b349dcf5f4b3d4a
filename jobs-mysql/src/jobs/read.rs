//! Reading jobs back: one by id, by the token of the statement that last moved them, the
//! waiting ones (test assertions), and the running ones whose cancellation was requested.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, SmallInt, Text, Varbinary};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobRow, JobState, Result};

use crate::cached::CachedQuery;
use crate::rows::{Id, json};
use crate::time::utc;

/// Every column of `jobs` a [`StoredJob`] reads (a macro, for `concat!`).
macro_rules! job_columns {
    () => {
        "id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts, timeout_ms, created_at, \
         scheduled_at, attempted_at, finalized_at, attempted_by, errors, result, cancel_requested_at, unique_key, \
         unique_states, workflow_id"
    };
}

pub(crate) use job_columns;

/// A job row as MySQL stores it; [`JobRow`] is the driver-neutral copy.
#[derive(QueryableByName)]
pub(crate) struct StoredJob {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    args: String,
    #[diesel(sql_type = Text)]
    meta: String,
    #[diesel(sql_type = Text)]
    tags: String,
    #[diesel(sql_type = SmallInt)]
    priority: i16,
    #[diesel(sql_type = Integer)]
    attempt: i32,
    #[diesel(sql_type = Integer)]
    max_attempts: i32,
    #[diesel(sql_type = Nullable<BigInt>)]
    timeout_ms: Option<i64>,
    #[diesel(sql_type = Datetime)]
    created_at: NaiveDateTime,
    #[diesel(sql_type = Datetime)]
    scheduled_at: NaiveDateTime,
    #[diesel(sql_type = Nullable<Datetime>)]
    attempted_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Datetime>)]
    finalized_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Text)]
    attempted_by: String,
    #[diesel(sql_type = Text)]
    errors: String,
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
    #[diesel(sql_type = Nullable<Datetime>)]
    cancel_requested_at: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Varbinary>)]
    unique_key: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Text>)]
    unique_states: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    workflow_id: Option<i64>,
}

/// A state name as stored.
pub(crate) use jobs_driver::workflow::stored_state as state;

/// States as `unique_states` stores them: comma-separated names, for `FIND_IN_SET`.
pub(crate) fn states_list(states: &[JobState]) -> String {
    states.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(",")
}

impl StoredJob {
    /// The driver-neutral row, its JSON columns decoded.
    pub(crate) fn into_row(self) -> Result<JobRow> {
        Ok(JobRow {
            id: self.id,
            state: state(&self.state)?,
            queue: self.queue,
            kind: self.kind,
            args: json("args", &self.args)?,
            meta: json("meta", &self.meta)?,
            tags: json("tags", &self.tags)?,
            priority: self.priority,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            timeout_ms: self.timeout_ms,
            created_at: utc(self.created_at),
            scheduled_at: utc(self.scheduled_at),
            attempted_at: self.attempted_at.map(utc),
            finalized_at: self.finalized_at.map(utc),
            attempted_by: json("attempted_by", &self.attempted_by)?,
            errors: json("errors", &self.errors)?,
            result: self.result.as_deref().map(|r| json("result", r)).transpose()?,
            cancel_requested_at: self.cancel_requested_at.map(utc),
            unique_key: self.unique_key,
            unique_states: self
                .unique_states
                .map(|s| s.split(',').filter(|s| !s.is_empty()).map(state).collect::<Result<Vec<_>>>())
                .transpose()?,
            workflow_id: self.workflow_id,
        })
    }
}

/// Rows as [`JobRow`]s.
pub(crate) fn into_rows(rows: Vec<StoredJob>) -> Result<Vec<JobRow>> {
    rows.into_iter().map(StoredJob::into_row).collect()
}

const GET: &str = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1");

/// Loads one job, on any async connection (the driver's, or an application's in its
/// transaction).
pub(crate) async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<StoredJob> = CachedQuery::new(GET).bind::<BigInt, _>(id).load(conn).await?;
    rows.into_iter().next().map(StoredJob::into_row).transpose()
}

/// See `jobs_driver::JobListWaitingParams`. Arguments are matched in Rust
/// (`jobs_driver::json_contains`), after `JSON_CONTAINS` narrowed the rows (it is looser
/// than Postgres's `@>`).
pub(crate) async fn list_waiting<C>(
    conn: &mut C,
    kind: Option<&str>,
    queue: Option<&str>,
    args: Option<&serde_json::Value>,
) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<StoredJob> = CachedQuery::new(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE state IN ('available', 'scheduled', 'retryable')
           AND ($1 IS NULL OR kind = $1) AND ($2 IS NULL OR queue = $2)
           AND ($3 IS NULL OR JSON_CONTAINS(args, $3))
         ORDER BY id"
    ))
    .bind::<Nullable<Text>, _>(kind)
    .bind::<Nullable<Text>, _>(queue)
    .bind::<Nullable<Text>, _>(args.map(|a| a.to_string()))
    .load(conn)
    .await?;
    let rows = into_rows(rows)?;
    Ok(match args {
        Some(want) => rows.into_iter().filter(|r| jobs_driver::json_contains(&r.args, want)).collect(),
        None => rows,
    })
}

/// Which of `ids` are running with a cancellation requested.
pub(crate) async fn list_cancel_requested<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<Id> = CachedQuery::new(concat!(
        "SELECT j.id FROM ",
        by_ids!(),
        " WHERE j.state = 'running' AND j.cancel_requested_at IS NOT NULL"
    ))
    .bind::<Text, _>(ids_json(ids))
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// `ids` as a JSON array, each once: the one parameter of a statement over many ids,
/// which `JSON_TABLE` turns into rows (an id given twice would join, and come back, twice).
pub(crate) fn ids_json(ids: &[i64]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    serde_json::Value::from(ids).to_string()
}
