//! Why a workflow cannot be inserted.

use crate::validation::{MAX_WORKFLOW_NAME, MAX_WORKFLOW_STEPS};

/// A workflow that cannot be inserted, and why. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// It has no step.
    #[error("a workflow needs at least one step")]
    Empty,
    /// More steps than [`MAX_WORKFLOW_STEPS`].
    #[error("a workflow takes at most {MAX_WORKFLOW_STEPS} steps; this one has {0}")]
    TooManySteps(usize),
    /// A name that is empty or longer than [`MAX_WORKFLOW_NAME`].
    #[error("a workflow's name must have 1 to {MAX_WORKFLOW_NAME} characters; got {0:?}")]
    Name(String),
    /// A step names itself or a later step.
    #[error("step {step} depends on step {on}, which is not an earlier step")]
    NotEarlier {
        /// The step.
        step: usize,
        /// What it names.
        on: usize,
    },
    /// A step with dependencies carries a uniqueness key: a pending job would hold (or be
    /// refused for) a key it may never use.
    #[error("step {0} has dependencies and a uniqueness key: a step that waits for others may not be unique")]
    UniqueWithDependencies(usize),
    /// A step names a job that does not exist.
    #[error("job {0}, named as a dependency, does not exist")]
    UnknownDependency(i64),
    /// No batch has this id (or the workflow with this id is not a batch).
    #[error("batch {0} does not exist")]
    UnknownBatch(i64),
    /// Members added to a batch that is sealed: its callback may already have run.
    #[error("batch {0} is sealed: no member may join it")]
    BatchSealed(i64),
    /// A batch's callback carries a uniqueness key: it waits for the members, and a
    /// waiting job may not be unique.
    #[error("a batch's callback may not have a uniqueness key")]
    UniqueCallback,
    /// A step's job breaks the rules of [`validation`](crate::validation).
    #[error("step {step}: {error}")]
    Job {
        /// The step.
        step: usize,
        /// What is wrong.
        error: crate::validation::InvalidJob,
    },
}
