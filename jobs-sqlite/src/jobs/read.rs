//! Reading jobs back: one by id, the waiting ones (test assertions), and the running ones
//! whose cancellation was requested.

use diesel::sql_types::{BigInt, Binary, Integer, Nullable, SmallInt, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncConnectionCore;
use jobs_driver::{JobListWaitingParams, JobRow, JobState, Result};

use crate::cached::CachedQuery;
use crate::rows::{Id, json};
use crate::time::{from_ms, from_ms_opt};

/// Every column of `jobs`, in the order of [`StoredJob`] (a macro, for `concat!`).
macro_rules! job_columns {
    () => {
        "id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts, timeout_ms, created_at, \
         scheduled_at, attempted_at, finalized_at, attempted_by, errors, result, cancel_requested_at, unique_key, \
         unique_states, workflow_id"
    };
}

/// Every column of `jobs`, in the order of [`StoredJob`].
pub(crate) const JOB_COLUMNS: &str = job_columns!();

const GET: &str = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1");

/// A job row as SQLite stores it; [`JobRow`] is the driver-neutral copy.
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
    #[diesel(sql_type = BigInt)]
    created_at: i64,
    #[diesel(sql_type = BigInt)]
    scheduled_at: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    attempted_at: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    finalized_at: Option<i64>,
    #[diesel(sql_type = Text)]
    attempted_by: String,
    #[diesel(sql_type = Text)]
    errors: String,
    #[diesel(sql_type = Nullable<Text>)]
    result: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    cancel_requested_at: Option<i64>,
    #[diesel(sql_type = Nullable<Binary>)]
    unique_key: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Text>)]
    unique_states: Option<String>,
    #[diesel(sql_type = Nullable<BigInt>)]
    workflow_id: Option<i64>,
}

impl StoredJob {
    /// The driver-neutral row, its JSON columns decoded.
    pub(crate) fn into_row(self) -> Result<JobRow> {
        Ok(JobRow {
            id: self.id,
            state: self
                .state
                .parse::<JobState>()
                .map_err(|e| jobs_driver::DriverError::unexpected(e.to_string()))?,
            queue: self.queue,
            kind: self.kind,
            args: json("args", &self.args)?,
            meta: json("meta", &self.meta)?,
            tags: json("tags", &self.tags)?,
            priority: self.priority,
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            timeout_ms: self.timeout_ms,
            created_at: from_ms(self.created_at),
            scheduled_at: from_ms(self.scheduled_at),
            attempted_at: from_ms_opt(self.attempted_at),
            finalized_at: from_ms_opt(self.finalized_at),
            attempted_by: json("attempted_by", &self.attempted_by)?,
            errors: json("errors", &self.errors)?,
            result: self.result.as_deref().map(|r| json("result", r)).transpose()?,
            cancel_requested_at: from_ms_opt(self.cancel_requested_at),
            unique_key: self.unique_key,
            unique_states: self.unique_states.as_deref().map(|s| json("unique_states", s)).transpose()?,
            workflow_id: self.workflow_id,
        })
    }
}

/// Rows as [`JobRow`]s.
pub(crate) fn into_rows(rows: Vec<StoredJob>) -> Result<Vec<JobRow>> {
    rows.into_iter().map(StoredJob::into_row).collect()
}

fn get_query(id: i64) -> CachedQuery<'static> {
    CachedQuery::new(GET).bind::<BigInt, _>(id)
}

/// Loads one job.
pub(crate) fn get(conn: &mut SqliteConnection, id: i64) -> Result<Option<JobRow>> {
    let rows: Vec<StoredJob> = get_query(id).load(conn)?;
    rows.into_iter().next().map(StoredJob::into_row).transpose()
}

/// Loads one job on an async connection of the application's.
pub(crate) async fn get_async<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let rows: Vec<StoredJob> = diesel_async::RunQueryDsl::load(get_query(id), conn).await?;
    rows.into_iter().next().map(StoredJob::into_row).transpose()
}

/// See [`JobListWaitingParams`]; `args` is matched with `jobs_json_contains`.
pub(crate) fn list_waiting(
    conn: &mut SqliteConnection,
    kind: Option<String>,
    queue: Option<String>,
    args: Option<String>,
) -> Result<Vec<JobRow>> {
    let mut q = diesel::sql_query(format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('available', 'scheduled', 'retryable')"
    ))
    .into_boxed::<Sqlite>();
    if let Some(kind) = kind {
        q = q.sql(" AND kind = ?").bind::<Text, _>(kind);
    }
    if let Some(queue) = queue {
        q = q.sql(" AND queue = ?").bind::<Text, _>(queue);
    }
    if let Some(args) = args {
        q = q.sql(" AND jobs_json_contains(args, ?)").bind::<Text, _>(args);
    }
    let rows: Vec<StoredJob> = q.sql(" ORDER BY id").load(conn)?;
    into_rows(rows)
}

/// The owned form of [`JobListWaitingParams`], to move onto the connection's thread.
pub(crate) fn waiting_params(
    params: &JobListWaitingParams<'_>,
) -> (Option<String>, Option<String>, Option<String>) {
    (params.kind.map(str::to_owned), params.queue.map(str::to_owned), params.args.map(|a| a.to_string()))
}

/// Which of `ids` are running with a cancellation requested.
pub(crate) fn list_cancel_requested(conn: &mut SqliteConnection, ids: &[i64]) -> Result<Vec<i64>> {
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?)) \
         AND state = 'running' AND cancel_requested_at IS NOT NULL",
    )
    .bind::<Text, _>(ids_json(ids))
    .load(conn)?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// `ids` as a JSON array, the one bound parameter of a statement over many ids
/// (`id IN (SELECT value FROM json_each(?))`).
pub(crate) fn ids_json(ids: &[i64]) -> String {
    serde_json::Value::from(ids).to_string()
}
