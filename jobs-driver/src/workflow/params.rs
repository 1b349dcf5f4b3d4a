//! The parameters of the workflow operations of the [`Driver`](crate::Driver).

use chrono::{DateTime, Utc};

use super::batch::BatchChange;
use super::definition::NewWorkflow;

/// `job_insert_workflow`: insert a workflow, its steps and their dependencies in one
/// transaction (see [`insert_workflow`](super::insert_workflow)).
#[derive(Debug, Clone, Copy)]
pub struct JobInsertWorkflowParams<'a> {
    /// The workflow.
    pub workflow: &'a NewWorkflow,
    /// The insert's time (`None`: the database's clock).
    pub now: Option<DateTime<Utc>>,
}

/// `job_batch`: open a batch, add members to one, seal it (see
/// [`change_batch`](super::change_batch)), in one transaction.
#[derive(Debug, Clone, Copy)]
pub struct JobBatchParams<'a> {
    /// The change.
    pub change: &'a BatchChange,
    /// Its time (`None`: the database's clock).
    pub now: Option<DateTime<Utc>>,
}

/// `job_settle`: settle the unsettled edges out of finished jobs (see
/// [`settle_round`](super::settle_round)), in transactions of at most `limit` dependents
/// each, following cancellations for [`MAX_CASCADE_ROUNDS`](super::MAX_CASCADE_ROUNDS)
/// rounds. Idempotent.
///
/// The settle of given jobs (the completer's, a cancel's, a delete's) is eager and never
/// waits: a dependency or dependent another transaction holds locked (an application's
/// transaction, say) is skipped, and left to the sweep. The sweep waits for locks.
#[derive(Debug, Clone, Copy)]
pub struct JobSettleParams<'a> {
    /// The jobs that finished (the completer's); `None`: a page of the settler's sweep,
    /// the finished or gone jobs among the next `limit` dependencies with unsettled edges
    /// out, after `after`.
    pub finished: Option<&'a [i64]>,
    /// The sweep's cursor: `0` at first, then the last page's [`Settled::next`].
    pub after: i64,
    /// The most dependents per transaction, and dependencies per page of the sweep.
    pub limit: usize,
    /// The time of the changes (`None`: the database's clock).
    pub now: Option<DateTime<Utc>>,
}

/// What [`job_settle`](crate::Driver::job_settle) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settled {
    /// Edges settled.
    pub settled: usize,
    /// Dependents that became due.
    pub released: usize,
    /// Dependents cancelled because a dependency failed them.
    pub cancelled: usize,
    /// It stopped at its bounds with work left (the next call goes on).
    pub more: bool,
    /// A sweep's cursor: where the next page starts (`None`: the sweep reached the end of
    /// the unsettled edges, and starts over at `0`).
    pub next: Option<i64>,
}

/// `workflow_get`: workflow (or batch) `id`'s row; `None` when there is none (never was,
/// or pruned with its last member).
#[derive(Debug, Clone, Copy)]
pub struct WorkflowGetParams {
    /// The workflow.
    pub id: i64,
}

/// `job_dependencies`: the dependencies of job `job_id`, with their outcome and copied
/// result, ascending by dependency.
#[derive(Debug, Clone, Copy)]
pub struct JobDependenciesParams {
    /// The dependent.
    pub job_id: i64,
}

/// `workflow_prune`: a page of the sweep of workflows' rows. Of the next `limit`
/// workflows after `after` (by id), deletes the rows no member is left in, in the jobs
/// table or the archive: a workflow's row lives as long as any of its members, and goes
/// after its last (pruned, deleted by a person or by a delete-on-completion queue). A
/// batch not sealed stays (it may still take members), and so does a row another
/// transaction holds (a batch's add): the next sweep comes back to it. In a transaction
/// of its own; never waits for a lock.
#[derive(Debug, Clone, Copy)]
pub struct WorkflowPruneParams {
    /// The sweep's cursor: `0` at first, then the last page's [`WorkflowPruned::next`].
    pub after: i64,
    /// The most workflows the page reads.
    pub limit: usize,
}

/// What [`workflow_prune`](crate::Driver::workflow_prune) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkflowPruned {
    /// Workflows' rows deleted.
    pub deleted: usize,
    /// Where the next page starts (`None`: the sweep reached the last workflow).
    pub next: Option<i64>,
}
