//! What a workflow is made of: its steps, what each depends on and needs, what a failure
//! does, and what inserting it returns.

use serde_json::Value;

use crate::error::WorkflowError;
use crate::job::{Inserted, NewJob};
use crate::state::JobState;
use crate::validation::{MAX_WORKFLOW_NAME, MAX_WORKFLOW_STEPS};

/// What a workflow does with the dependents of a dependency that ended without meeting
/// their needs (discarded, cancelled, or deleted, for a step that needs it completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnFailure {
    /// Cancel them, each with an error entry naming the dependency, and theirs in turn.
    /// Retrying the dependency brings them back (`pending`), and the workflow goes on.
    #[default]
    Cancel,
    /// Leave them `pending`, for a person to retry the dependency (the workflow then goes
    /// on) or to cancel them.
    Hold,
}

impl OnFailure {
    /// The stored name: `cancel` or `hold`.
    pub const fn as_str(self) -> &'static str {
        match self {
            OnFailure::Cancel => "cancel",
            OnFailure::Hold => "hold",
        }
    }

    /// Reads a stored name; anything but `hold` cancels (the safe reading).
    pub fn from_stored(s: &str) -> OnFailure {
        if s == "hold" { OnFailure::Hold } else { OnFailure::Cancel }
    }
}

/// What a dependent needs of a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Needs {
    /// That it completed (a workflow's step).
    #[default]
    Completed,
    /// That it finished, whichever way (a batch's callback).
    Finished,
}

impl Needs {
    /// The stored name: `completed` or `finished`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Needs::Completed => "completed",
            Needs::Finished => "finished",
        }
    }

    /// Reads a stored name; anything but `finished` needs completion.
    pub fn from_stored(s: &str) -> Needs {
        if s == "finished" { Needs::Finished } else { Needs::Completed }
    }

    /// Whether a dependency that ended in `outcome` (a final state) meets this need.
    pub fn met_by(self, outcome: JobState) -> bool {
        match self {
            Needs::Completed => outcome == JobState::Completed,
            Needs::Finished => outcome.is_final(),
        }
    }
}

/// A step's dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DependsOn {
    /// An earlier step of the same workflow, by its index in [`NewWorkflow::steps`].
    Step(usize),
    /// A job that already exists, by id (in any state; one that is gone is an error).
    Job(i64),
}

/// One step of a [`NewWorkflow`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewStep {
    /// The job.
    pub job: NewJob,
    /// What it waits for (none: it is due as its job says).
    pub after: Vec<DependsOn>,
    /// What it needs of each.
    pub needs: Needs,
}

/// A workflow to insert: its steps in an order where each depends only on earlier ones
/// (which a builder that hands out a step's handle when it is added guarantees: no cycle
/// can be built).
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflow {
    /// A name for people (the dashboard), not unique.
    pub name: String,
    /// What a failed dependency does to its dependents.
    pub on_failure: OnFailure,
    /// The steps.
    pub steps: Vec<NewStep>,
}

impl NewWorkflow {
    /// Checks everything that does not need the database: a name, at least one step and
    /// not too many, each step's job valid, each dependency an earlier step, no uniqueness
    /// key on a step that waits.
    pub fn validate(&self) -> Result<(), WorkflowError> {
        let chars = self.name.chars().count();
        if chars == 0 || chars > MAX_WORKFLOW_NAME {
            return Err(WorkflowError::Name(self.name.chars().take(MAX_WORKFLOW_NAME + 1).collect()));
        }
        if self.steps.is_empty() {
            return Err(WorkflowError::Empty);
        }
        if self.steps.len() > MAX_WORKFLOW_STEPS {
            return Err(WorkflowError::TooManySteps(self.steps.len()));
        }
        for (i, step) in self.steps.iter().enumerate() {
            step.job.validate().map_err(|error| WorkflowError::Job { step: i, error })?;
            if !step.after.is_empty() && step.job.unique.is_some() {
                return Err(WorkflowError::UniqueWithDependencies(i));
            }
            for dep in &step.after {
                if let DependsOn::Step(on) = *dep
                    && on >= i
                {
                    return Err(WorkflowError::NotEarlier { step: i, on });
                }
            }
        }
        Ok(())
    }
}

/// What inserting a workflow did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertedWorkflow {
    /// The workflow's id.
    pub id: i64,
    /// Each step's job, in step order (a step whose uniqueness key was held is the job
    /// that holds it, which does not join the workflow).
    pub jobs: Vec<Inserted>,
}

/// A workflow's (or batch's) row, as `workflow_get` reads it: for people (the dashboard's
/// workflow view). The pruner removes it with the last of its members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowInfo {
    /// Its id (its members' `workflow_id`).
    pub id: i64,
    /// The name it was enqueued with.
    pub name: String,
    /// What a failed member does to the members that wait for it.
    pub on_failure: OnFailure,
    /// Its callback, when it is a batch.
    pub callback_id: Option<i64>,
    /// A batch that takes no more members (its callback waits for the seal); a workflow
    /// is never sealed.
    pub sealed: bool,
}

/// One dependency of a job, as `job_dependencies` reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dependency {
    /// The job depended on.
    pub depends_on: i64,
    /// Its kind (the type its result decodes as).
    pub kind: String,
    /// What the dependent needs of it.
    pub needs: Needs,
    /// Its final state once settled (`cancelled` if it was deleted); `None` while it has
    /// not finished (or its finish is not settled yet).
    pub outcome: Option<JobState>,
    /// Its result, copied when it was settled as completed for a dependent that needs it
    /// completed (so that pruning it loses nothing its dependents may read).
    pub result: Option<Value>,
}

/// The `error_type` of the error entry of a job cancelled because a dependency failed.
pub const DEPENDENCY_FAILED: &str = "dependency_failed";

/// The error entry (JSON text) of a job cancelled because `dependency` ended `outcome`.
pub fn dependency_failed_entry(
    dependency: i64,
    outcome: JobState,
    at: chrono::DateTime<chrono::Utc>,
) -> String {
    serde_json::json!({
        "attempt": 0,
        "at": at,
        "error_type": DEPENDENCY_FAILED,
        "message": format!("dependency {dependency} ended {outcome}"),
        "dependency": dependency,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(after: Vec<DependsOn>) -> NewStep {
        NewStep { job: NewJob::new("k", "q", "{}"), after, needs: Needs::Completed }
    }

    #[test]
    fn validation_names_what_is_wrong() {
        let mut flow = NewWorkflow { name: "w".into(), on_failure: OnFailure::Cancel, steps: vec![] };
        assert_eq!(flow.validate(), Err(WorkflowError::Empty));
        flow.steps = vec![step(vec![]), step(vec![DependsOn::Step(1)])];
        assert_eq!(flow.validate(), Err(WorkflowError::NotEarlier { step: 1, on: 1 }));
        flow.steps[1].after = vec![DependsOn::Step(0), DependsOn::Job(7)];
        assert_eq!(flow.validate(), Ok(()));
        flow.steps[1].job.unique = Some((vec![1], vec![JobState::Available]));
        assert_eq!(flow.validate(), Err(WorkflowError::UniqueWithDependencies(1)));
        flow.steps[1].job.unique = None;
        flow.name = String::new();
        assert!(matches!(flow.validate(), Err(WorkflowError::Name(_))));
    }

    #[test]
    fn needs_are_met_by_their_outcomes() {
        assert!(Needs::Completed.met_by(JobState::Completed));
        assert!(!Needs::Completed.met_by(JobState::Cancelled));
        assert!(Needs::Finished.met_by(JobState::Discarded));
        assert!(!Needs::Finished.met_by(JobState::Running));
        for n in [Needs::Completed, Needs::Finished] {
            assert_eq!(Needs::from_stored(n.as_str()), n);
        }
        for o in [OnFailure::Cancel, OnFailure::Hold] {
            assert_eq!(OnFailure::from_stored(o.as_str()), o);
        }
    }
}
