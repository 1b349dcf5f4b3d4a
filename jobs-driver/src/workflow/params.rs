//! The parameters of the workflow operations of the [`Driver`](crate::Driver).

use chrono::{DateTime, Utc};

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

/// `job_settle`: settle the unsettled edges out of finished jobs (see
/// [`settle_round`](super::settle_round)), in transactions of at most `limit` dependents
/// each, following cancellations for [`MAX_CASCADE_ROUNDS`](super::MAX_CASCADE_ROUNDS)
/// rounds. Idempotent.
#[derive(Debug, Clone, Copy)]
pub struct JobSettleParams<'a> {
    /// The jobs that finished (the completer's); `None`: the settler's sweep, every
    /// finished or gone job with unsettled edges out (at most `limit` of them).
    pub finished: Option<&'a [i64]>,
    /// The most dependents per transaction, and jobs per sweep.
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
}

/// `job_dependencies`: the dependencies of job `job_id`, with their outcome and copied
/// result, ascending by dependency.
#[derive(Debug, Clone, Copy)]
pub struct JobDependenciesParams {
    /// The dependent.
    pub job_id: i64,
}
