//! Workflows on SQLite (migration `workflows`): the statements of [`WorkflowStore`], on
//! which `jobs_driver::workflow` writes the rules once, and the read of a job's
//! dependencies. One writer at a time holds the file, so the rules' locks are the
//! transaction's own; the wake-ups of released jobs are rows of `job_notifications`,
//! collected to be delivered in this process once the transaction commits.

use async_trait::async_trait;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel::sqlite::Sqlite;
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::workflow::{
    self, DependencyState, Edge, JobUpdate, Locked, SweepPage, Transition, WORKFLOW_GET, WORKFLOWS_AFTER,
    WorkflowInfoRow, WorkflowRow, WorkflowStore, dependency_failed_entry,
};
use jobs_driver::{Dependency, Inserted, JobState, NewJob, Notification, OnFailure, Result, WorkflowInfo};
use serde_json::Value;

use crate::cached::CachedQuery;
use crate::jobs::read::ids_json;
use crate::notifications;
use crate::rows::Id;
use crate::time::from_ms;

mod operations;
mod rows;
pub(crate) mod statements;

use rows::{BatchRow, EdgeRow, LockedRow, PageRow, Released, StateRow};
use statements::*;

/// [`WorkflowStore`] on a connection in a transaction, at `now_ms`, collecting the
/// notifications it adds.
pub(crate) struct SqliteStore<'c, C> {
    conn: &'c mut C,
    now_ms: i64,
    /// The wake-ups added (deliver them once the transaction commits).
    pub(crate) told: Vec<Notification>,
}

impl<'c, C> SqliteStore<'c, C> {
    pub(crate) fn new(conn: &'c mut C, now_ms: i64) -> Self {
        SqliteStore { conn, now_ms, told: Vec::new() }
    }
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl<C> WorkflowStore for SqliteStore<'_, C>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    async fn dependency_states(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<StateRow> =
            CachedQuery::new(DEPENDENCY_STATES).bind::<Text, _>(ids_json(ids)).load(self.conn).await?;
        rows.into_iter()
            .map(|r| DependencyState::from_stored(r.id, r.kind, &r.state, r.result.as_deref()))
            .collect()
    }

    async fn mark_dependencies(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>> {
        // The transaction holds the file: a completion runs wholly before it (the job is
        // read finished, or gone: refused) or after it (the edge is there to read).
        self.dependency_states(ids).await
    }

    async fn insert_workflow_row(&mut self, name: &str, on_failure: OnFailure) -> Result<i64> {
        let row: Id = CachedQuery::new(INSERT_WORKFLOW)
            .bind::<Text, _>(name)
            .bind::<Text, _>(on_failure.as_str())
            .bind::<BigInt, _>(self.now_ms)
            .get_result(self.conn)
            .await?;
        Ok(row.id)
    }

    async fn lock_workflow(&mut self, id: i64) -> Result<Option<WorkflowRow>> {
        let rows: Vec<BatchRow> =
            CachedQuery::new(LOCK_WORKFLOW).bind::<BigInt, _>(id).load(self.conn).await?;
        Ok(rows.into_iter().next().map(|r| WorkflowRow { callback_id: r.callback_id, sealed: r.sealed }))
    }

    async fn set_batch(&mut self, id: i64, callback_id: i64, sealed: bool) -> Result<()> {
        CachedQuery::new(SET_BATCH)
            .bind::<BigInt, _>(id)
            .bind::<BigInt, _>(callback_id)
            .bind::<diesel::sql_types::Bool, _>(sealed)
            .bind::<BigInt, _>(self.now_ms)
            .execute(self.conn)
            .await?;
        Ok(())
    }

    async fn insert_jobs(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        let (inserted, told) = crate::jobs::insert::insert_many_async(self.conn, jobs, self.now_ms).await?;
        self.told.extend(told);
        Ok(inserted)
    }

    async fn insert_edges(&mut self, edges: &[Edge]) -> Result<()> {
        CachedQuery::new(INSERT_EDGES)
            .bind::<Text, _>(workflow::edges_json(edges))
            .execute(self.conn)
            .await?;
        Ok(())
    }

    async fn dependents(&mut self, depends_on: &[i64], settled: bool, n: usize) -> Result<Vec<i64>> {
        let sql = if settled { DEPENDENTS_SETTLED } else { DEPENDENTS_UNSETTLED };
        let rows: Vec<Id> = CachedQuery::new(sql)
            .bind::<Text, _>(ids_json(depends_on))
            .bind::<BigInt, _>(limit(n))
            .load(self.conn)
            .await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn lock_dependencies(&mut self, ids: &[i64], _skip_locked: bool) -> Result<Vec<DependencyState>> {
        // The transaction holds the file: no other writer, nothing to skip.
        self.dependency_states(ids).await
    }

    async fn lock_jobs(&mut self, ids: &[i64], _skip_locked: bool) -> Result<Vec<Locked>> {
        let rows: Vec<LockedRow> =
            CachedQuery::new(READ_LOCKED).bind::<Text, _>(ids_json(ids)).load(self.conn).await?;
        rows.into_iter()
            .map(|r| {
                Ok(Locked {
                    id: r.id,
                    state: workflow::stored_state(&r.state)?,
                    waiting_on: r.waiting_on,
                    failed_on: r.failed_on,
                    on_failure: OnFailure::from_stored(&r.on_failure),
                    cancelled_by_dependency: r.cancelled_by_dependency,
                })
            })
            .collect()
    }

    async fn edges(&mut self, depends_on: &[i64], job_ids: &[i64], settled: bool) -> Result<Vec<Edge>> {
        let sql = if settled { EDGES_SETTLED } else { EDGES_UNSETTLED };
        let rows: Vec<EdgeRow> = CachedQuery::new(sql)
            .bind::<Text, _>(ids_json(depends_on))
            .bind::<Text, _>(ids_json(job_ids))
            .load(self.conn)
            .await?;
        rows.into_iter().map(EdgeRow::into_edge).collect()
    }

    async fn settled_edges_into(&mut self, job_ids: &[i64]) -> Result<Vec<Edge>> {
        let rows: Vec<EdgeRow> =
            CachedQuery::new(SETTLED_EDGES_INTO).bind::<Text, _>(ids_json(job_ids)).load(self.conn).await?;
        rows.into_iter().map(EdgeRow::into_edge).collect()
    }

    async fn set_outcome(
        &mut self,
        edges: &[(i64, i64)],
        outcome: Option<JobState>,
        result: Option<&Value>,
    ) -> Result<()> {
        CachedQuery::new(SET_OUTCOME)
            .bind::<Text, _>(workflow::pairs_json(edges))
            .bind::<Nullable<Text>, _>(outcome.map(JobState::as_str))
            .bind::<Nullable<Text>, _>(result.map(Value::to_string))
            .execute(self.conn)
            .await?;
        Ok(())
    }

    async fn delete_edges_into(&mut self, job_ids: &[i64]) -> Result<()> {
        CachedQuery::new(DELETE_EDGES_INTO).bind::<Text, _>(ids_json(job_ids)).execute(self.conn).await?;
        Ok(())
    }

    async fn update_jobs(&mut self, u: &JobUpdate) -> Result<()> {
        let now_ms = u.now.map_or(self.now_ms, |t| t.timestamp_millis());
        macro_rules! run {
            ($sql:expr) => {
                CachedQuery::new($sql)
                    .bind::<Text, _>(ids_json(&u.ids))
                    .bind::<Integer, _>(u.waiting_on)
                    .bind::<Integer, _>(u.failed_on)
                    .bind::<Nullable<BigInt>, _>(u.workflow_id)
            };
        }
        match u.transition {
            Transition::Keep => {
                run!(SET_COUNTERS).execute(self.conn).await?;
            }
            Transition::Pend => {
                run!(PEND).execute(self.conn).await?;
            }
            Transition::Release => {
                let released: Vec<Released> = run!(RELEASE).bind::<BigInt, _>(now_ms).load(self.conn).await?;
                let available =
                    released.iter().filter(|r| r.state == "available").map(|r| r.queue.as_str()).collect();
                for woken in notifications::per_queue(available) {
                    notifications::add_async(self.conn, &woken).await?;
                    self.told.push(woken);
                }
            }
            Transition::Cancel { dependency, outcome } => {
                let entry = dependency_failed_entry(dependency, outcome, from_ms(now_ms));
                run!(CANCEL).bind::<BigInt, _>(now_ms).bind::<Text, _>(entry).execute(self.conn).await?;
            }
        }
        Ok(())
    }

    async fn finished_with_unsettled(&mut self, after: i64, n: usize) -> Result<SweepPage> {
        let rows: Vec<PageRow> = CachedQuery::new(FINISHED_WITH_UNSETTLED)
            .bind::<BigInt, _>(after)
            .bind::<BigInt, _>(limit(n))
            .load(self.conn)
            .await?;
        Ok(SweepPage::of(rows.into_iter().map(|r| (r.id, r.finished)).collect(), n))
    }

    async fn workflows_of(&mut self, job_ids: &[i64]) -> Result<Vec<i64>> {
        let rows: Vec<Id> =
            CachedQuery::new(WORKFLOWS_OF).bind::<Text, _>(ids_json(job_ids)).load(self.conn).await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn workflows_after(&mut self, after: i64, n: usize) -> Result<Vec<i64>> {
        let rows: Vec<Id> = CachedQuery::new(WORKFLOWS_AFTER)
            .bind::<BigInt, _>(after)
            .bind::<BigInt, _>(limit(n))
            .load(self.conn)
            .await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn delete_empty_workflows(&mut self, ids: &[i64]) -> Result<usize> {
        Ok(CachedQuery::new(DELETE_EMPTY_WORKFLOWS).bind::<Text, _>(ids_json(ids)).execute(self.conn).await?)
    }
}

/// Retries `ids` (see `control::retry_many`), then re-opens their dependents' edges, in
/// the connection's transaction. Returns what changed and the notifications added.
pub(crate) async fn retry_and_reopen<C>(
    conn: &mut C,
    ids: &[i64],
    now: i64,
) -> Result<(jobs_driver::Retried, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let (retried, mut told) = crate::jobs::control::retry_many(conn, ids, now).await?;
    let mut store = SqliteStore::new(conn, now);
    jobs_driver::workflow::reopen(&mut store, ids, None).await?;
    told.append(&mut store.told);
    Ok((retried, told))
}

/// Deletes the jobs of `ids` that are not running (see `control::delete_many`), then the
/// edges into those it deleted (the edges out of them settle as cancelled). The
/// workflows it emptied go after the commit (`jobs_driver::workflow::forget_after_delete`)
/// or with the pruner's sweep.
pub(crate) async fn delete_and_forget<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let deleted = crate::jobs::control::delete_many(conn, ids).await?;
    CachedQuery::new(DELETE_EDGES_INTO_GONE).bind::<Text, _>(ids_json(ids)).execute(conn).await?;
    Ok(deleted)
}

/// The dependencies of `job_id` (see `JobDependenciesParams`).
pub(crate) fn dependencies(conn: &mut diesel::SqliteConnection, job_id: i64) -> Result<Vec<Dependency>> {
    let rows: Vec<EdgeRow> =
        diesel::RunQueryDsl::load(CachedQuery::new(DEPENDENCIES).bind::<BigInt, _>(job_id), conn)?;
    rows.into_iter().map(|r| r.into_edge().map(Dependency::from)).collect()
}

/// Workflow `id`'s row (see `WorkflowGetParams`).
pub(crate) fn workflow_get(conn: &mut diesel::SqliteConnection, id: i64) -> Result<Option<WorkflowInfo>> {
    let rows: Vec<WorkflowInfoRow> =
        diesel::RunQueryDsl::load(CachedQuery::new(WORKFLOW_GET).bind::<BigInt, _>(id), conn)?;
    Ok(rows.into_iter().next().map(WorkflowInfo::from))
}
