//! Reading jobs back: one by id, the waiting ones (test assertions), and the running ones
//! whose cancellation was requested (the heartbeat's question when it cannot LISTEN).

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobListWaitingParams, JobRow, JobState, Result};

use crate::rows::Id;
use crate::schema::jobs_all;

/// A job row as diesel loads it; [`JobRow`] is the driver-neutral copy.
#[derive(Queryable, Selectable)]
#[diesel(table_name = jobs_all, check_for_backend(Pg))]
pub(crate) struct StoredJob {
    id: i64,
    state: JobState,
    queue: String,
    kind: String,
    args: serde_json::Value,
    meta: serde_json::Value,
    tags: Vec<String>,
    priority: i16,
    attempt: i32,
    max_attempts: i32,
    timeout_ms: Option<i64>,
    created_at: DateTime<Utc>,
    scheduled_at: DateTime<Utc>,
    attempted_at: Option<DateTime<Utc>>,
    finalized_at: Option<DateTime<Utc>>,
    attempted_by: Vec<String>,
    errors: serde_json::Value,
    result: Option<serde_json::Value>,
    cancel_requested_at: Option<DateTime<Utc>>,
    unique_key: Option<Vec<u8>>,
    unique_states: Option<Vec<JobState>>,
    workflow_id: Option<i64>,
}

impl From<StoredJob> for JobRow {
    fn from(s: StoredJob) -> JobRow {
        JobRow {
            id: s.id,
            state: s.state,
            queue: s.queue,
            kind: s.kind,
            args: s.args,
            meta: s.meta,
            tags: s.tags,
            priority: s.priority,
            attempt: s.attempt,
            max_attempts: s.max_attempts,
            timeout_ms: s.timeout_ms,
            created_at: s.created_at,
            scheduled_at: s.scheduled_at,
            attempted_at: s.attempted_at,
            finalized_at: s.finalized_at,
            attempted_by: s.attempted_by,
            errors: s.errors,
            result: s.result,
            cancel_requested_at: s.cancel_requested_at,
            unique_key: s.unique_key,
            unique_states: s.unique_states,
            workflow_id: s.workflow_id,
        }
    }
}

/// Loads one job.
pub(crate) async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Option<StoredJob> =
        jobs_all::table.find(id).select(StoredJob::as_select()).get_result(conn).await.optional()?;
    Ok(row.map(JobRow::from))
}

/// See [`JobListWaitingParams`].
pub(crate) async fn list_waiting<C>(conn: &mut C, params: JobListWaitingParams<'_>) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    use diesel::PgJsonbExpressionMethods;
    let mut q = jobs_all::table
        .filter(jobs_all::state.eq_any([JobState::Available, JobState::Scheduled, JobState::Retryable]))
        .select(StoredJob::as_select())
        .order(jobs_all::id)
        .into_boxed();
    if let Some(kind) = params.kind {
        q = q.filter(jobs_all::kind.eq(kind.to_owned()));
    }
    if let Some(queue) = params.queue {
        q = q.filter(jobs_all::queue.eq(queue.to_owned()));
    }
    if let Some(args) = params.args {
        q = q.filter(jobs_all::args.contains(args.clone()));
    }
    let rows: Vec<StoredJob> = q.load(conn).await?;
    Ok(rows.into_iter().map(JobRow::from).collect())
}

/// Which of `ids` are running with a cancellation requested.
pub(crate) async fn list_cancel_requested<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT id FROM jobs WHERE id = ANY ($1) AND state = 'running' AND cancel_requested_at IS NOT NULL",
    )
    .bind::<Array<BigInt>, _>(ids)
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}
