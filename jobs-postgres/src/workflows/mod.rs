//! Workflows on Postgres (migration `workflows`): the statements of
//! [`WorkflowStore`], on which `jobs_driver::workflow` writes the rules once, and the read
//! of a job's dependencies. Finished jobs may be in the archive: dependencies are read
//! through `jobs_all`, counters are kept in both tables, and a cancelled dependent brought
//! back (`Transition::Pend`) moves back to `jobs`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Int4, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::workflow::{
    DependencyState, Edge, JobUpdate, Locked, SweepPage, Transition, WORKFLOW_GET, WORKFLOWS_AFTER,
    WorkflowInfoRow, WorkflowRow, WorkflowStore, dependency_failed_entry,
};
use jobs_driver::{Dependency, Inserted, JobState, NewJob, OnFailure, Result, WorkflowInfo};
use serde_json::Value;

use crate::rows::Id;

mod operations;
mod rows;
pub(crate) mod statements;

use rows::{BatchRow, EdgeRow, LockedRow, PageRow, StateRow};
use statements::*;

/// [`WorkflowStore`] on a connection in a transaction.
pub(crate) struct PgStore<'c, C>(pub(crate) &'c mut C);

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// How many times a lock goes after jobs that moved between `jobs` and the archive while
/// it ran (each move is a transaction of the archiver or a retry: more is a fault).
const LOCK_ATTEMPTS: usize = 5;

/// Runs `sqls` (a lock in `jobs`, then one in the archive, on the ids `$1`) until every job
/// of `ids` that exists is locked: one that moved between the tables while the first ran
/// is missed by both (the second's row was not there yet, or was deleted under it), and
/// is locked again where it went. With `skip_locked`, once (a job left out may be held).
async fn lock_in_both<C, R>(
    conn: &mut C,
    sqls: [&'static str; 2],
    ids: &[i64],
    skip_locked: bool,
    id_of: fn(&R) -> i64,
) -> Result<Vec<R>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
    R: QueryableByName<Pg> + Send + 'static,
{
    let mut rows: Vec<R> = Vec::new();
    let mut wanted = ids.to_vec();
    for _ in 0..LOCK_ATTEMPTS {
        for sql in sqls {
            let found: Vec<R> = diesel::sql_query(sql).bind::<Array<BigInt>, _>(&wanted).load(conn).await?;
            rows.extend(found);
        }
        if skip_locked {
            return Ok(rows);
        }
        let have: std::collections::HashSet<i64> = rows.iter().map(id_of).collect();
        let missing: Vec<i64> = wanted.iter().filter(|id| !have.contains(id)).copied().collect();
        if missing.is_empty() {
            return Ok(rows);
        }
        let existing: Vec<Id> =
            diesel::sql_query(EXISTING).bind::<Array<BigInt>, _>(&missing).load(conn).await?;
        wanted = existing.into_iter().map(|r| r.id).collect();
        if wanted.is_empty() {
            return Ok(rows);
        }
    }
    Err(jobs_driver::DriverError::unexpected(format!(
        "jobs {wanted:?} kept moving between jobs and the archive while being locked"
    )))
}

#[async_trait]
impl<C> WorkflowStore for PgStore<'_, C>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    async fn dependency_states(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<StateRow> =
            diesel::sql_query(DEPENDENCY_STATES).bind::<Array<BigInt>, _>(ids).load(self.0).await?;
        Ok(rows.into_iter().map(StateRow::into_state).collect())
    }

    async fn lock_dependencies(&mut self, ids: &[i64], skip_locked: bool) -> Result<Vec<DependencyState>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let k = usize::from(skip_locked);
        let sqls = [LOCK_DEPENDENCIES_HOT[k], LOCK_DEPENDENCIES_ARCHIVED[k]];
        let rows: Vec<StateRow> = lock_in_both(self.0, sqls, ids, skip_locked, |r: &StateRow| r.id).await?;
        Ok(rows.into_iter().map(StateRow::into_state).collect())
    }

    async fn mark_dependencies(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>> {
        let rows: Vec<StateRow> =
            diesel::sql_query(MARK_DEPENDENCIES).bind::<Array<BigInt>, _>(ids).load(self.0).await?;
        Ok(rows.into_iter().map(StateRow::into_state).collect())
    }

    async fn insert_workflow_row(&mut self, name: &str, on_failure: OnFailure) -> Result<i64> {
        let row: Id = diesel::sql_query(INSERT_WORKFLOW)
            .bind::<Text, _>(name)
            .bind::<Text, _>(on_failure.as_str())
            .get_result(self.0)
            .await?;
        Ok(row.id)
    }

    async fn lock_workflow(&mut self, id: i64) -> Result<Option<WorkflowRow>> {
        let rows: Vec<BatchRow> = diesel::sql_query(LOCK_WORKFLOW).bind::<BigInt, _>(id).load(self.0).await?;
        Ok(rows.into_iter().next().map(|r| WorkflowRow { callback_id: r.callback_id, sealed: r.sealed }))
    }

    async fn set_batch(&mut self, id: i64, callback_id: i64, sealed: bool) -> Result<()> {
        diesel::sql_query(SET_BATCH)
            .bind::<BigInt, _>(id)
            .bind::<BigInt, _>(callback_id)
            .bind::<diesel::sql_types::Bool, _>(sealed)
            .execute(self.0)
            .await?;
        Ok(())
    }

    async fn insert_jobs(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        crate::jobs::insert::insert_many(self.0, jobs, None).await
    }

    async fn insert_edges(&mut self, edges: &[Edge]) -> Result<()> {
        let depends_on: Vec<i64> = edges.iter().map(|e| e.depends_on).collect();
        let job_ids: Vec<i64> = edges.iter().map(|e| e.job_id).collect();
        let kinds: Vec<&str> = edges.iter().map(|e| e.kind.as_str()).collect();
        let needs: Vec<&str> = edges.iter().map(|e| e.needs.as_str()).collect();
        let outcomes: Vec<Option<&str>> = edges.iter().map(|e| e.outcome.map(JobState::as_str)).collect();
        let results: Vec<Option<&Value>> = edges.iter().map(|e| e.result.as_ref()).collect();
        diesel::sql_query(INSERT_EDGES)
            .bind::<Array<BigInt>, _>(&depends_on)
            .bind::<Array<BigInt>, _>(&job_ids)
            .bind::<Array<Text>, _>(&kinds)
            .bind::<Array<Text>, _>(&needs)
            .bind::<Array<Nullable<Text>>, _>(&outcomes)
            .bind::<Array<Nullable<Jsonb>>, _>(&results)
            .execute(self.0)
            .await?;
        Ok(())
    }

    async fn dependents(&mut self, depends_on: &[i64], settled: bool, n: usize) -> Result<Vec<i64>> {
        let sql = if settled { DEPENDENTS_SETTLED } else { DEPENDENTS_UNSETTLED };
        let rows: Vec<Id> = diesel::sql_query(sql)
            .bind::<Array<BigInt>, _>(depends_on)
            .bind::<BigInt, _>(limit(n))
            .load(self.0)
            .await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn lock_jobs(&mut self, ids: &[i64], skip_locked: bool) -> Result<Vec<Locked>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let k = usize::from(skip_locked);
        let locked: Vec<Id> =
            lock_in_both(self.0, [LOCK_HOT[k], LOCK_ARCHIVED[k]], ids, skip_locked, |r: &Id| r.id).await?;
        let locked: Vec<i64> = locked.into_iter().map(|r| r.id).collect();
        let rows: Vec<LockedRow> =
            diesel::sql_query(READ_LOCKED).bind::<Array<BigInt>, _>(&locked).load(self.0).await?;
        Ok(rows
            .into_iter()
            .map(|r| Locked {
                id: r.id,
                state: r.state,
                waiting_on: r.waiting_on,
                failed_on: r.failed_on,
                on_failure: OnFailure::from_stored(&r.on_failure),
                cancelled_by_dependency: r.cancelled_by_dependency,
            })
            .collect())
    }

    async fn edges(&mut self, depends_on: &[i64], job_ids: &[i64], settled: bool) -> Result<Vec<Edge>> {
        let sql = if settled { EDGES_SETTLED } else { EDGES_UNSETTLED };
        let rows: Vec<EdgeRow> = diesel::sql_query(sql)
            .bind::<Array<BigInt>, _>(depends_on)
            .bind::<Array<BigInt>, _>(job_ids)
            .load(self.0)
            .await?;
        Ok(rows.into_iter().map(Edge::from).collect())
    }

    async fn settled_edges_into(&mut self, job_ids: &[i64]) -> Result<Vec<Edge>> {
        let rows: Vec<EdgeRow> =
            diesel::sql_query(SETTLED_EDGES_INTO).bind::<Array<BigInt>, _>(job_ids).load(self.0).await?;
        Ok(rows.into_iter().map(Edge::from).collect())
    }

    async fn set_outcome(
        &mut self,
        edges: &[(i64, i64)],
        outcome: Option<JobState>,
        result: Option<&Value>,
    ) -> Result<()> {
        let (depends_on, job_ids): (Vec<i64>, Vec<i64>) = edges.iter().copied().unzip();
        diesel::sql_query(SET_OUTCOME)
            .bind::<Array<BigInt>, _>(&depends_on)
            .bind::<Array<BigInt>, _>(&job_ids)
            .bind::<Nullable<Text>, _>(outcome.map(JobState::as_str))
            .bind::<Nullable<Jsonb>, _>(result)
            .execute(self.0)
            .await?;
        Ok(())
    }

    async fn delete_edges_into(&mut self, job_ids: &[i64]) -> Result<()> {
        diesel::sql_query(DELETE_EDGES_INTO).bind::<Array<BigInt>, _>(job_ids).execute(self.0).await?;
        Ok(())
    }

    async fn update_jobs(&mut self, u: &JobUpdate) -> Result<()> {
        macro_rules! run {
            ($sql:expr) => {
                diesel::sql_query($sql)
                    .bind::<Array<BigInt>, _>(&u.ids)
                    .bind::<Int4, _>(u.waiting_on)
                    .bind::<Int4, _>(u.failed_on)
                    .bind::<Nullable<BigInt>, _>(u.workflow_id)
            };
        }
        match u.transition {
            Transition::Keep => {
                run!(SET_COUNTERS_HOT).execute(self.0).await?;
                run!(SET_COUNTERS_ARCHIVED).execute(self.0).await?;
            }
            Transition::Pend => {
                run!(PEND_HOT).execute(self.0).await?;
                run!(PEND_ARCHIVED).execute(self.0).await?;
            }
            Transition::Release => {
                run!(RELEASE).bind::<Nullable<Timestamptz>, _>(u.now).execute(self.0).await?;
            }
            Transition::Cancel { dependency, outcome } => {
                let entry = format!("[{}]", dependency_failed_entry(dependency, outcome, at(u.now)));
                run!(CANCEL)
                    .bind::<Nullable<Timestamptz>, _>(u.now)
                    .bind::<Text, _>(entry)
                    .execute(self.0)
                    .await?;
            }
        }
        Ok(())
    }

    async fn finished_with_unsettled(&mut self, after: i64, n: usize) -> Result<SweepPage> {
        let rows: Vec<PageRow> = diesel::sql_query(FINISHED_WITH_UNSETTLED)
            .bind::<BigInt, _>(after)
            .bind::<BigInt, _>(limit(n))
            .load(self.0)
            .await?;
        Ok(SweepPage::of(rows.into_iter().map(|r| (r.id, r.finished)).collect(), n))
    }

    async fn workflows_of(&mut self, job_ids: &[i64]) -> Result<Vec<i64>> {
        let rows: Vec<Id> =
            diesel::sql_query(WORKFLOWS_OF).bind::<Array<BigInt>, _>(job_ids).load(self.0).await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn workflows_after(&mut self, after: i64, n: usize) -> Result<Vec<i64>> {
        let rows: Vec<Id> = diesel::sql_query(WORKFLOWS_AFTER)
            .bind::<BigInt, _>(after)
            .bind::<BigInt, _>(limit(n))
            .load(self.0)
            .await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    async fn delete_empty_workflows(&mut self, ids: &[i64]) -> Result<usize> {
        Ok(diesel::sql_query(DELETE_EMPTY_WORKFLOWS).bind::<Array<BigInt>, _>(ids).execute(self.0).await?)
    }
}

/// The time of an error entry: the injected clock's, or this machine's.
fn at(now: Option<DateTime<Utc>>) -> DateTime<Utc> {
    now.unwrap_or_else(Utc::now)
}

/// Retries `ids` (see `control::retry_many`), then re-opens their dependents' edges, in the
/// connection's transaction.
pub(crate) async fn retry_and_reopen<C>(conn: &mut C, ids: &[i64]) -> Result<jobs_driver::Retried>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let retried = crate::jobs::control::retry_many(conn, ids).await?;
    jobs_driver::workflow::reopen(&mut PgStore(conn), ids, None).await?;
    Ok(retried)
}

/// Deletes the jobs of `ids` that are not running (see `control::delete_many`), then the
/// edges into those it deleted (the edges out of them settle as cancelled). The
/// workflows it emptied go after the commit (`jobs_driver::workflow::forget_after_delete`)
/// or with the pruner's sweep.
pub(crate) async fn delete_and_forget<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let deleted = crate::jobs::control::delete_many(conn, ids).await?;
    diesel::sql_query(DELETE_EDGES_INTO_GONE).bind::<Array<BigInt>, _>(ids).execute(conn).await?;
    Ok(deleted)
}

/// The dependencies of `job_id` (see `JobDependenciesParams`).
pub(crate) async fn dependencies<C>(conn: &mut C, job_id: i64) -> Result<Vec<Dependency>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<EdgeRow> = diesel::sql_query(DEPENDENCIES).bind::<BigInt, _>(job_id).load(conn).await?;
    Ok(rows.into_iter().map(|r| Dependency::from(Edge::from(r))).collect())
}

/// Workflow `id`'s row (see `WorkflowGetParams`).
pub(crate) async fn workflow_get<C>(conn: &mut C, id: i64) -> Result<Option<WorkflowInfo>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<WorkflowInfoRow> = diesel::sql_query(WORKFLOW_GET).bind::<BigInt, _>(id).load(conn).await?;
    Ok(rows.into_iter().next().map(WorkflowInfo::from))
}
