//! The workflow reads of the dashboard and of a job's context: a job's dependencies, a
//! workflow's row.

use diesel::mysql::Mysql;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::workflow::{WORKFLOW_GET, WorkflowInfoRow};
use jobs_driver::{Dependency, Result, WorkflowInfo};

use super::rows::EdgeRow;
use super::statements::DEPENDENCIES;
use crate::cached::CachedQuery;

/// The dependencies of `job_id` (see `JobDependenciesParams`).
pub(crate) async fn dependencies<C>(conn: &mut C, job_id: i64) -> Result<Vec<Dependency>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<EdgeRow> = CachedQuery::new(DEPENDENCIES).bind::<BigInt, _>(job_id).load(conn).await?;
    rows.into_iter().map(|r| r.into_edge().map(Dependency::from)).collect()
}

/// Workflow `id`'s row (see `WorkflowGetParams`).
pub(crate) async fn workflow_get<C>(conn: &mut C, id: i64) -> Result<Option<WorkflowInfo>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<WorkflowInfoRow> = CachedQuery::new(WORKFLOW_GET).bind::<BigInt, _>(id).load(conn).await?;
    Ok(rows.into_iter().next().map(WorkflowInfo::from))
}
