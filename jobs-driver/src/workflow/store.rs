//! [`WorkflowStore`]: the statements the workflow rules need, which each driver writes in
//! its SQL. Every method runs on one connection inside a transaction the driver opened.

use async_trait::async_trait;
use serde_json::Value;

use super::definition::{Needs, OnFailure};
use crate::error::Result;
use crate::job::{Inserted, NewJob};
use crate::state::JobState;

/// A job's state and result, as a dependency.
#[derive(Debug, Clone, PartialEq)]
pub struct DependencyState {
    /// The job.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its state.
    pub state: JobState,
    /// Its result (completed jobs).
    pub result: Option<Value>,
}

/// One row of `job_dependencies`.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// The job depended on.
    pub depends_on: i64,
    /// The dependent.
    pub job_id: i64,
    /// The dependency's kind.
    pub kind: String,
    /// What the dependent needs of it.
    pub needs: Needs,
    /// Its final state once settled.
    pub outcome: Option<JobState>,
    /// Its result, copied when settled completed for a dependent that needs completion.
    pub result: Option<Value>,
}

/// A dependent, locked for the rest of the transaction, with its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locked {
    /// The job.
    pub id: i64,
    /// Its state.
    pub state: JobState,
    /// Its unsettled dependencies.
    pub waiting_on: i32,
    /// Its settled dependencies that ended without meeting its needs.
    pub failed_on: i32,
    /// Its workflow's setting (`Cancel` for a job in none).
    pub on_failure: OnFailure,
}

/// What [`WorkflowStore::update_jobs`] does to a job's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Leaves it.
    Keep,
    /// To `pending` (finish time cleared; on Postgres, back from the archive): a step
    /// inserted with unfinished dependencies, or brought back by a re-opened dependency.
    Pend,
    /// A `pending` job to `scheduled` if its `scheduled_at` is still ahead, else
    /// `available` (and its queue woken): its last dependency finished as it needs.
    Release,
    /// A `pending` job to `cancelled`, finished now, with the error entry
    /// [`dependency_failed_entry`](super::dependency_failed_entry) of `dependency`.
    Cancel {
        /// The dependency that failed it.
        dependency: i64,
        /// How that dependency ended.
        outcome: JobState,
    },
}

/// Jobs that get the same counters and the same [`Transition`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobUpdate {
    /// The jobs, ascending.
    pub ids: Vec<i64>,
    /// Their new `waiting_on`.
    pub waiting_on: i32,
    /// Their new `failed_on`.
    pub failed_on: i32,
    /// Sets `workflow_id` when given (an insert's new steps).
    pub workflow_id: Option<i64>,
    /// What happens to their state.
    pub transition: Transition,
    /// The time of the change (`None`: the database's clock).
    pub now: Option<chrono::DateTime<chrono::Utc>>,
}

/// The statements of the workflow rules, on one connection in a transaction. A driver
/// implements it on a wrapper of its connection; [`insert_workflow`](super::insert_workflow),
/// [`settle_round`](super::settle_round) and [`reopen`](super::reopen) call it.
///
/// Lock order: a writer of a job's incoming edges first locks that job
/// ([`lock_jobs`](Self::lock_jobs)), so counters and edges change together, and two
/// settles lock their dependents in id order.
#[async_trait]
pub trait WorkflowStore: Send {
    /// The state and result of each of `ids` that exists, wherever it is (Postgres: the
    /// archive too), in any order; no lock. Reads what committed before the statement.
    async fn dependency_states(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>>;

    /// Inserts the row of a workflow; returns its id.
    async fn insert_workflow_row(&mut self, name: &str, on_failure: OnFailure) -> Result<i64>;

    /// Inserts `jobs` through the driver's ordinary insert (validation done; uniqueness
    /// keys and wake-ups as for any job), in input order.
    async fn insert_jobs(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>>;

    /// Inserts `edges` (none of them exists yet).
    async fn insert_edges(&mut self, edges: &[Edge]) -> Result<()>;

    /// The dependents, ascending, at most `limit`, of the edges out of `depends_on` that
    /// are settled (`settled`) or not. No lock.
    async fn dependents(&mut self, depends_on: &[i64], settled: bool, limit: usize) -> Result<Vec<i64>>;

    /// Locks the jobs of `ids` that exist, in id order, for the rest of the transaction,
    /// and reads them (finished jobs too: on Postgres those in the archive as well).
    async fn lock_jobs(&mut self, ids: &[i64]) -> Result<Vec<Locked>>;

    /// The edges from `depends_on` into `job_ids`, settled (`settled`) or not, as they
    /// are now (read after [`lock_jobs`](Self::lock_jobs) of `job_ids`, they are current).
    async fn edges(&mut self, depends_on: &[i64], job_ids: &[i64], settled: bool) -> Result<Vec<Edge>>;

    /// Sets the outcome (`None`: re-opens) and result of the edges from `depends_on` into
    /// `job_ids`.
    async fn set_outcome(
        &mut self,
        depends_on: i64,
        job_ids: &[i64],
        outcome: Option<JobState>,
        result: Option<&Value>,
    ) -> Result<()>;

    /// Deletes the edges into `job_ids` (jobs that are gone).
    async fn delete_edges_into(&mut self, job_ids: &[i64]) -> Result<()>;

    /// Applies `update` (its counters, `workflow_id`, and transition).
    async fn update_jobs(&mut self, update: &JobUpdate) -> Result<()>;

    /// The settler's sweep: up to `limit` jobs, ascending, that are finished or gone and
    /// have unsettled edges out. Reads only the unsettled edges (an index of them), joined
    /// to their dependency by primary key; never a scan of finished jobs.
    async fn finished_with_unsettled(&mut self, limit: usize) -> Result<Vec<i64>>;
}
