//! Workflows on MySQL and MariaDB (migration `workflows`): the statements of
//! [`WorkflowStore`], on which `jobs_driver::workflow` writes the rules once, and the read
//! of a job's dependencies.
//!
//! The reads the rules make after their locks (the dependents, their edges) are locking
//! reads, which see the latest rows whatever the transaction's isolation (an
//! application's transaction may run `REPEATABLE READ`); the driver's own sessions run
//! `READ COMMITTED`, so that their plain reads of dependencies' states are current too. The wake-ups of released jobs are rows of
//! `job_notifications`, collected to be delivered in this process once the transaction
//! commits.

use async_trait::async_trait;
use chrono::Utc;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncConnectionCore, RunQueryDsl};
use jobs_driver::workflow::{
    self, DependencyState, Edge, JobUpdate, Locked, SweepPage, Transition, WORKFLOWS_AFTER, WorkflowRow,
    WorkflowStore, dependency_failed_entry,
};
use jobs_driver::{Inserted, JobState, NewJob, Notification, OnFailure, Result};
use serde_json::Value;

use crate::cached::CachedQuery;
use crate::jobs::read::{ids_json, state};
use crate::notifications;
use crate::rows::Id;
use crate::time::naive_opt;

mod operations;
pub(crate) mod reads;
mod rows;
pub(crate) mod statements;

use rows::{BatchRow, EdgeRow, LockedRow, PageRow, QueueRow, Setting, StateRow};
use statements::*;

/// [`WorkflowStore`] on a connection in a transaction, collecting the notifications it adds.
pub(crate) struct MysqlStore<'c, C> {
    conn: &'c mut C,
    /// The wake-ups added (deliver them once the transaction commits).
    pub(crate) told: Vec<Notification>,
}

impl<'c, C> MysqlStore<'c, C> {
    pub(crate) fn new(conn: &'c mut C) -> Self {
        MysqlStore { conn, told: Vec::new() }
    }
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl<C> WorkflowStore for MysqlStore<'_, C>
where
    C: AsyncConnection<Backend = Mysql> + Send,
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

    async fn lock_dependencies(&mut self, ids: &[i64], skip_locked: bool) -> Result<Vec<DependencyState>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<StateRow> = CachedQuery::new(LOCK_DEPENDENCIES[usize::from(skip_locked)])
            .bind::<Text, _>(ids_json(ids))
            .load(self.conn)
            .await?;
        rows.into_iter()
            .map(|r| DependencyState::from_stored(r.id, r.kind, &r.state, r.result.as_deref()))
            .collect()
    }

    async fn mark_dependencies(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>> {
        // No mark: a share lock is enough here. A completion's `DELETE` waits for it, and
        // its `NOT EXISTS` then reads the edge this transaction added (InnoDB locks the
        // subquery's rows: it waited for the uncommitted edge even with no lock on the
        // job). Two inserts after one job share the lock and never wait for each other.
        self.lock_dependencies(ids, false).await
    }

    async fn insert_workflow_row(&mut self, name: &str, on_failure: OnFailure) -> Result<i64> {
        CachedQuery::new(INSERT_WORKFLOW)
            .bind::<Text, _>(name)
            .bind::<Text, _>(on_failure.as_str())
            .execute(self.conn)
            .await?;
        let row: Id = CachedQuery::new("SELECT LAST_INSERT_ID() AS id").get_result(self.conn).await?;
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
            .execute(self.conn)
            .await?;
        Ok(())
    }

    async fn insert_jobs(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        let (inserted, told) = crate::jobs::insert::insert_many(self.conn, jobs, None).await?;
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
        if depends_on.is_empty() {
            return Ok(Vec::new());
        }
        let sql = if settled { DEPENDENTS_SETTLED } else { DEPENDENTS_UNSETTLED };
        let rows: Vec<Id> = CachedQuery::new(sql)
            .bind::<Text, _>(ids_json(depends_on))
            .bind::<BigInt, _>(limit(n))
            .load(self.conn)
            .await?;
        let mut ids: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
        ids.dedup();
        Ok(ids)
    }

    async fn lock_jobs(&mut self, ids: &[i64], skip_locked: bool) -> Result<Vec<Locked>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<LockedRow> = CachedQuery::new(LOCK[usize::from(skip_locked)])
            .bind::<Text, _>(ids_json(ids))
            .load(self.conn)
            .await?;
        let workflows: Vec<i64> = rows.iter().filter_map(|r| r.workflow_id).collect();
        let settings: Vec<Setting> = if workflows.is_empty() {
            Vec::new()
        } else {
            CachedQuery::new(SETTINGS).bind::<Text, _>(ids_json(&workflows)).load(self.conn).await?
        };
        let on_failure = |w: Option<i64>| {
            settings
                .iter()
                .find(|s| Some(s.id) == w)
                .map_or(OnFailure::Cancel, |s| OnFailure::from_stored(&s.on_failure))
        };
        rows.iter()
            .map(|r| {
                Ok(Locked {
                    id: r.id,
                    state: state(&r.state)?,
                    waiting_on: r.waiting_on,
                    failed_on: r.failed_on,
                    on_failure: on_failure(r.workflow_id),
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
        let ids = ids_json(&u.ids);
        let now = naive_opt(u.now);
        macro_rules! run {
            ($sql:expr) => {
                CachedQuery::new($sql)
                    .bind::<Text, _>(ids.as_str())
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
                let queues: Vec<QueueRow> = CachedQuery::new(RELEASED_QUEUES)
                    .bind::<Text, _>(ids.as_str())
                    .bind::<Nullable<diesel::sql_types::Datetime>, _>(now)
                    .load(self.conn)
                    .await?;
                run!(RELEASE)
                    .bind::<Nullable<diesel::sql_types::Datetime>, _>(now)
                    .execute(self.conn)
                    .await?;
                for q in queues {
                    let woken = Notification::JobsAvailable { queue: q.queue };
                    notifications::add(self.conn, &woken).await?;
                    self.told.push(woken);
                }
            }
            Transition::Cancel { dependency, outcome } => {
                let entry = dependency_failed_entry(dependency, outcome, u.now.unwrap_or_else(Utc::now));
                run!(CANCEL)
                    .bind::<Nullable<diesel::sql_types::Datetime>, _>(now)
                    .bind::<Text, _>(entry)
                    .execute(self.conn)
                    .await?;
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
        let ids_of = |rows: Vec<Id>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        let empty: Vec<Id> =
            CachedQuery::new(EMPTY_CLOSED_WORKFLOWS).bind::<Text, _>(ids_json(ids)).load(self.conn).await?;
        if empty.is_empty() {
            return Ok(0);
        }
        let locked: Vec<Id> = CachedQuery::new(LOCK_WORKFLOWS)
            .bind::<Text, _>(ids_json(&ids_of(empty)))
            .load(self.conn)
            .await?;
        if locked.is_empty() {
            return Ok(0);
        }
        Ok(CachedQuery::new(DELETE_WORKFLOWS)
            .bind::<Text, _>(ids_json(&ids_of(locked)))
            .execute(self.conn)
            .await?)
    }
}

/// Retries `ids` (see `control::retry_many`), then re-opens their dependents' edges, in
/// the connection's transaction. Returns what changed and the notifications added.
pub(crate) async fn retry_and_reopen<C>(
    conn: &mut C,
    ids: &[i64],
) -> Result<(jobs_driver::Retried, Vec<Notification>)>
where
    C: AsyncConnection<Backend = Mysql> + Send,
{
    let (retried, mut told) = crate::jobs::control::retry_many(conn, ids).await?;
    let mut store = MysqlStore::new(conn);
    jobs_driver::workflow::reopen(&mut store, ids, None).await?;
    told.append(&mut store.told);
    Ok((retried, told))
}

/// Deletes the jobs of `ids` that are not running (see `control::delete_many`), then the
/// edges into those it deleted (the edges out of them settle as cancelled). The
/// workflows it emptied go after the commit (`jobs_driver::workflow::forget_after_delete`)
/// or with the pruner's sweep: never in an application's transaction, where its reads
/// would lock ranges of `jobs_workflow_idx` under `REPEATABLE READ`.
pub(crate) async fn delete_and_forget<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let deleted = crate::jobs::control::delete_many(conn, ids).await?;
    CachedQuery::new(DELETE_EDGES_INTO_GONE).bind::<Text, _>(ids_json(ids)).execute(conn).await?;
    Ok(deleted)
}
