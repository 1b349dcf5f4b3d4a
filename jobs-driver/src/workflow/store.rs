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
    /// Its last error entry is [`DEPENDENCY_FAILED`](super::DEPENDENCY_FAILED) and no
    /// person has asked to cancel it since (`cancel_requested_at` is unset; a retry
    /// clears it): a dependency's failure cancelled it, not a person.
    pub cancelled_by_dependency: bool,
}

/// A batch's row, locked ([`WorkflowStore::lock_workflow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkflowRow {
    /// Its callback, if it is a batch.
    pub callback_id: Option<i64>,
    /// It is sealed.
    pub sealed: bool,
}

/// A page of the settler's sweep ([`WorkflowStore::finished_with_unsettled`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepPage {
    /// The dependencies of the page that are finished or gone, ascending.
    pub finished: Vec<i64>,
    /// The last dependency the page scanned, when it scanned a full page: the next page
    /// starts after it. `None`: the scan reached the end (the next starts over).
    pub next: Option<i64>,
}

impl SweepPage {
    /// The page of a scan of at most `limit` dependencies, ascending, each with whether
    /// it is finished or gone.
    pub fn of(scanned: Vec<(i64, bool)>, limit: usize) -> SweepPage {
        SweepPage {
            next: if scanned.len() >= limit { scanned.last().map(|(id, _)| *id) } else { None },
            finished: scanned.into_iter().filter(|(_, finished)| *finished).map(|(id, _)| id).collect(),
        }
    }
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
/// Lock order: a settle first share-locks the dependencies it settles
/// ([`lock_dependencies`](Self::lock_dependencies)), so that a retry of one (which
/// updates its row) waits for the settle to commit, and then reads the edges it settled;
/// an insert locks the existing jobs it depends on before it writes, those in the live
/// table in id order ([`mark_dependencies`](Self::mark_dependencies)), then those in
/// Postgres's archive shared, as a settle's and a retry's locks go (the live
/// table, then the archive), so that a retry of one waits for it too and a completion of
/// one keeps it. A writer of a job's incoming edges first locks that job
/// ([`lock_jobs`](Self::lock_jobs)), so counters and edges change together, and two
/// settles lock their dependents in id order. (A dependency's id is below its
/// dependent's, but a batch's callback's, which is inserted before its members.)
#[async_trait]
pub trait WorkflowStore: Send {
    /// The state and result of each of `ids` that exists, wherever it is (Postgres: the
    /// archive too), in any order; no lock. Reads the transaction's snapshot (under
    /// `REPEATABLE READ`, what committed before its first read).
    async fn dependency_states(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>>;

    /// Share-locks the jobs of `ids` that exist, wherever they are (Postgres: the archive
    /// too), for the rest of the transaction, and returns their states as they are now (a
    /// locking read: current whatever the transaction's isolation). With `skip_locked`,
    /// a job another transaction holds is skipped (left out) rather than waited for.
    async fn lock_dependencies(&mut self, ids: &[i64], skip_locked: bool) -> Result<Vec<DependencyState>>;

    /// Locks the jobs of `ids` that are in the live table, in id order, for the rest of
    /// the transaction, marks the unfinished ones depended on where the driver needs it,
    /// and returns their states, current. On Postgres the lock is exclusive and the mark
    /// (`depended_on`) is what a success on a delete-on-completion queue reads, after
    /// waiting for this transaction, to keep the job for its dependents (the edge this
    /// transaction adds is past that statement's snapshot). On MySQL a share lock is
    /// enough: the completion's `DELETE` waits for it and then reads the edge. A job in
    /// Postgres's archive (finished) is left out: share-lock it with
    /// [`lock_dependencies`](Self::lock_dependencies). SQLite's writers take turns: it
    /// reads the states.
    async fn mark_dependencies(&mut self, ids: &[i64]) -> Result<Vec<DependencyState>>;

    /// Inserts the row of a workflow; returns its id.
    async fn insert_workflow_row(&mut self, name: &str, on_failure: OnFailure) -> Result<i64>;

    /// Locks the row of workflow `id` for the rest of the transaction and reads it
    /// (`None`: there is none).
    async fn lock_workflow(&mut self, id: i64) -> Result<Option<WorkflowRow>>;

    /// Sets workflow `id`'s callback, and seals it (`sealed`: sets the time it was sealed,
    /// where it is not set).
    async fn set_batch(&mut self, id: i64, callback_id: i64, sealed: bool) -> Result<()>;

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
    /// Without `skip_locked`, every one of `ids` that exists is returned, locked (a job
    /// that moved between tables meanwhile is locked where it went), so one left out is
    /// gone; with it, a job another transaction holds is left out.
    async fn lock_jobs(&mut self, ids: &[i64], skip_locked: bool) -> Result<Vec<Locked>>;

    /// The edges from `depends_on` into `job_ids`, settled (`settled`) or not, as they
    /// are now (read after [`lock_jobs`](Self::lock_jobs) of `job_ids`, they are current).
    async fn edges(&mut self, depends_on: &[i64], job_ids: &[i64], settled: bool) -> Result<Vec<Edge>>;

    /// The settled edges into `job_ids` (read after [`lock_jobs`](Self::lock_jobs) of
    /// them, they are current).
    async fn settled_edges_into(&mut self, job_ids: &[i64]) -> Result<Vec<Edge>>;

    /// Sets the outcome (`None`: re-opens) and result of the edges `edges`, each
    /// `(depends_on, job_id)`: one statement for any number of dependencies.
    async fn set_outcome(
        &mut self,
        edges: &[(i64, i64)],
        outcome: Option<JobState>,
        result: Option<&Value>,
    ) -> Result<()>;

    /// Deletes the edges into `job_ids` (jobs that are gone).
    async fn delete_edges_into(&mut self, job_ids: &[i64]) -> Result<()>;

    /// Applies `update` (its counters, `workflow_id`, and transition).
    async fn update_jobs(&mut self, update: &JobUpdate) -> Result<()>;

    /// A page of the settler's sweep: the first `limit` distinct dependencies after
    /// `after` with unsettled edges out, and which of them are finished or gone. Reads
    /// only the unsettled edges (an index of them, from the cursor on), each dependency
    /// looked up by primary key; never a scan of finished jobs, nor of every unsettled
    /// edge at each pass.
    async fn finished_with_unsettled(&mut self, after: i64, limit: usize) -> Result<SweepPage>;

    /// The workflows of the jobs `job_ids` that exist (wherever they are), ascending,
    /// distinct; no lock.
    async fn workflows_of(&mut self, job_ids: &[i64]) -> Result<Vec<i64>>;

    /// The ids of the first `limit` workflows after `after`, ascending; no lock.
    async fn workflows_after(&mut self, after: i64, limit: usize) -> Result<Vec<i64>>;

    /// Of the workflows `ids`, deletes the rows no member is left in (the jobs table, and
    /// the archive where there is one), but a batch not sealed (it may still take
    /// members) and a row another transaction holds (skipped, never waited for); returns
    /// how many it deleted. Run after the members' removal committed, on the driver's
    /// connection: it locks only workflows' rows, in id order.
    async fn delete_empty_workflows(&mut self, ids: &[i64]) -> Result<usize>;
}
