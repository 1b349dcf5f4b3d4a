//! Workflows: jobs that wait for other jobs (`docs/design/workflows.md`).
//!
//! A [`NewWorkflow`] is a list of steps, each a [`NewJob`](crate::NewJob) with the steps or existing jobs
//! it depends on. Inserting it (`Driver::job_insert_workflow`,
//! `ConnectionDriver::insert_workflow`) writes the workflow's row, the steps through the
//! driver's ordinary insert, one `job_dependencies` row (an *edge*) per dependency, and
//! leaves every step with unfinished dependencies `pending`. When a dependency finishes,
//! *settling* (`settle`) records its final state on its edges, counts it on each
//! dependent (`waiting_on`, `failed_on`), and releases the dependents whose every
//! dependency finished as they need, or cancels them when their workflow cancels on
//! failure. A retried dependency *re-opens* its edges ([`reopen`]).
//!
//! The rules are written once, here, over [`WorkflowStore`]: the few statements a driver
//! implements on a connection inside a transaction of its own. Drivers own the SQL.

mod batch;
mod definition;
mod forget;
mod params;
mod plan;
mod reopen;
mod settle;
mod store;
mod stored;
mod sweep;
pub use crate::error::WorkflowError;
pub use crate::validation::{MAX_WORKFLOW_NAME, MAX_WORKFLOW_STEPS};
pub use batch::{BatchChange, BatchChanged, BatchTarget, change_batch};
pub use definition::{
    DEPENDENCY_FAILED, Dependency, DependsOn, InsertedWorkflow, Needs, NewStep, NewWorkflow, OnFailure,
    WorkflowInfo, dependency_failed_entry,
};
pub use forget::{forget_after_delete, prune_workflows};
pub use params::{
    JobBatchParams, JobDependenciesParams, JobInsertWorkflowParams, JobSettleParams, Settled,
    WorkflowGetParams, WorkflowPruneParams, WorkflowPruned,
};
pub use plan::insert_workflow;
pub use reopen::{REOPEN_LIMIT, Reopened, reopen};
pub use settle::{MAX_CASCADE_ROUNDS, SettleRound, settle_after_control, settle_cascade, settle_round};
pub use store::{
    DependencyState, Edge, JobUpdate, Locked, SweepPage, Transition, WorkflowRow, WorkflowStore,
};
pub use stored::{WORKFLOW_GET, WORKFLOWS_AFTER, WorkflowInfoRow, edges_json, pairs_json, stored_state};
pub use sweep::finish_page;
