//! Workflows: jobs that wait for other jobs, built in Rust and inserted in one call
//! (`docs/guide.md`, "Workflows"; the rules: `docs/design/workflows.md`).
//!
//! ```no_run
//! use jobs_core::{Job, JobContext, JobExt, Workflow};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize)] struct Import { file: String }
//! # struct ImportFile;
//! # impl Job for ImportFile { const KIND: &'static str = "import"; type Args = Import; type Output = u32;
//! #   type Error = std::io::Error; async fn run(_: JobContext, _: Import) -> Result<u32, std::io::Error> { Ok(3) } }
//! # struct ProcessRow;
//! # impl Job for ProcessRow { const KIND: &'static str = "row"; type Args = u32; type Output = bool;
//! #   type Error = std::io::Error; async fn run(_: JobContext, _: u32) -> Result<bool, std::io::Error> { Ok(true) } }
//! # struct Report;
//! # impl Job for Report { const KIND: &'static str = "report"; type Args = (); type Output = ();
//! #   type Error = std::io::Error; async fn run(_: JobContext, _: ()) -> Result<(), std::io::Error> { Ok(()) } }
//! # async fn demo(tx: &mut diesel_async::AsyncPgConnection) -> jobs_core::Result<()> {
//! // Import a file, process its rows in parallel, then report: in the caller's transaction.
//! let mut flow = Workflow::new("import 42");
//! let import = flow.add(ImportFile::build(Import { file: "rows.csv".into() }));
//! let rows: Vec<_> = (0..3).map(|i| flow.add_after(ProcessRow::build(i), [&import])).collect();
//! flow.add_after(Report::build(()), &rows);
//! let enqueued = flow.enqueue(tx).await?;
//! println!("workflow {} starts with job {}", enqueued.id, enqueued.job(&import));
//! # Ok(()) }
//! ```

use std::marker::PhantomData;

use jobs_driver::{DependsOn, InsertedWorkflow, Needs, NewStep, NewWorkflow, OnFailure};

use crate::enqueue::{EnqueueRequest, Enqueued, Enqueuer};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::job_context::JobContext;
use crate::middleware::InsertChain;
use crate::outcome::IntoOutcome;
use serde::de::DeserializeOwned;

/// A workflow being built: steps, each a job with the earlier steps (or existing jobs) it
/// waits for. A step with dependencies stays `pending` until every one has completed;
/// when one fails (discarded, cancelled, deleted), its dependents are cancelled (the
/// default, [`OnFailure::Cancel`]) or held for a person ([`OnFailure::Hold`]). Retrying
/// the failed step lets the workflow go on.
#[derive(Debug)]
#[must_use = "a workflow does nothing until it is enqueued"]
pub struct Workflow {
    name: String,
    on_failure: OnFailure,
    steps: Vec<NewStep>,
    /// The first step that could not be encoded: `enqueue` reports it.
    invalid: Option<Error>,
}

/// A step of a [`Workflow`] that runs job `J`: name it in later steps' dependencies, and
/// find its job's id in the [`EnqueuedWorkflow`].
#[derive(Debug)]
pub struct Step<J> {
    index: usize,
    job: PhantomData<fn() -> J>,
}

impl<J> Clone for Step<J> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<J> Copy for Step<J> {}

impl<J> From<&Step<J>> for DependsOn {
    fn from(step: &Step<J>) -> DependsOn {
        DependsOn::Step(step.index)
    }
}

impl<J> From<Step<J>> for DependsOn {
    fn from(step: Step<J>) -> DependsOn {
        DependsOn::Step(step.index)
    }
}

impl Workflow {
    /// An empty workflow named `name` (for people: the dashboard shows it).
    pub fn new(name: impl Into<String>) -> Workflow {
        Workflow { name: name.into(), on_failure: OnFailure::default(), steps: Vec::new(), invalid: None }
    }

    /// What a failed step does to the steps that wait for it (default: cancel them).
    pub fn on_failure(mut self, on_failure: OnFailure) -> Workflow {
        self.on_failure = on_failure;
        self
    }

    /// Adds a step that waits for nothing.
    pub fn add<J: Job>(&mut self, request: EnqueueRequest<J>) -> Step<J> {
        self.add_after(request, std::iter::empty::<DependsOn>())
    }

    /// Adds a step that waits for `after`: earlier steps (`&step`, a slice or a `Vec` of
    /// them) or existing jobs (`DependsOn::Job(id)`), until each has completed.
    pub fn add_after<J: Job, D: Into<DependsOn>>(
        &mut self,
        request: EnqueueRequest<J>,
        after: impl IntoIterator<Item = D>,
    ) -> Step<J> {
        let index = self.steps.len();
        match request.to_new_job() {
            Ok(job) => {
                let after = after.into_iter().map(Into::into).collect();
                self.steps.push(NewStep { job, after, needs: Needs::Completed });
            }
            Err(e) => {
                self.invalid.get_or_insert(e);
                // A placeholder keeps the indexes of later steps; nothing is inserted.
                self.steps.push(NewStep {
                    job: jobs_driver::NewJob::new(J::KIND, "invalid", "null"),
                    after: Vec::new(),
                    needs: Needs::Completed,
                });
            }
        }
        Step { index, job: PhantomData }
    }

    /// How many steps it has.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether it has no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The rows to insert, checked: the first step that could not be encoded, or a
    /// [`WorkflowError`](jobs_driver::WorkflowError).
    pub fn into_new_workflow(self) -> Result<NewWorkflow> {
        if let Some(e) = self.invalid {
            return Err(e);
        }
        let workflow = NewWorkflow { name: self.name, on_failure: self.on_failure, steps: self.steps };
        workflow.validate()?;
        Ok(workflow)
    }

    /// Inserts the workflow through `target`, in one transaction: the caller's when
    /// `target` is a connection inside one (roll back, and none of it existed).
    pub async fn enqueue<E: Enqueuer>(self, target: E) -> Result<EnqueuedWorkflow> {
        let mut workflow = self.into_new_workflow()?;
        let mut chain = InsertChain::current();
        chain.before(workflow.steps.iter_mut().map(|step| &mut step.job))?;
        // A middleware may have given a step a uniqueness key, which a waiting step may not hold.
        workflow.validate()?;
        let InsertedWorkflow { id, jobs } = chain.around(target.insert_workflow(&workflow)).await?;
        chain.after(workflow.steps.iter().map(|step| &step.job).zip(&jobs));
        Ok(EnqueuedWorkflow { id, jobs })
    }
}

/// What enqueueing a workflow did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueuedWorkflow {
    /// The workflow's id.
    pub id: i64,
    /// Each step's job, in the order they were added.
    pub jobs: Vec<Enqueued>,
}

impl EnqueuedWorkflow {
    /// The id of `step`'s job.
    pub fn job<J>(&self, step: &Step<J>) -> i64 {
        self.jobs.get(step.index).map_or(0, |j| j.id)
    }
}

/// What a workflow's step reads of its dependencies.
impl JobContext {
    /// This job's dependencies (it is a workflow step): each dependency's id and kind,
    /// how it ended once it finished, and its result if it completed.
    pub async fn dependencies(&self) -> Result<Vec<jobs_driver::Dependency>> {
        let driver = self.driver().ok_or_else(|| Error::Runtime("this job context has no driver".into()))?;
        Ok(driver.job_dependencies(jobs_driver::JobDependenciesParams { job_id: self.id() }).await?)
    }

    /// The result of this job's dependency of kind `J`, typed as `J` returns it:
    /// `let rows: u32 = ctx.dependency_result::<ImportFile>().await?;`. Fails when it has
    /// none or several of that kind that completed (then use
    /// [`dependency_results`](Self::dependency_results)), or when the stored result does
    /// not decode (a job whose output type changed since it ran).
    pub async fn dependency_result<J: Job>(&self) -> Result<<J::Output as IntoOutcome>::Value>
    where
        <J::Output as IntoOutcome>::Value: DeserializeOwned,
    {
        let mut results = self.dependency_results::<J>().await?;
        match results.len() {
            1 => Ok(results.remove(0).1),
            n => Err(Error::DependencyResult {
                kind: J::KIND.into(),
                reason: format!("this job has {n} completed dependencies of this kind; expected one"),
            }),
        }
    }

    /// The results of this job's completed dependencies of kind `J`, with their job ids,
    /// ascending: a fan-in's inputs (`ctx.dependency_results::<ProcessRow>()`).
    pub async fn dependency_results<J: Job>(&self) -> Result<Vec<(i64, <J::Output as IntoOutcome>::Value)>>
    where
        <J::Output as IntoOutcome>::Value: DeserializeOwned,
    {
        let mut results = Vec::new();
        for d in self.dependencies().await? {
            if d.kind != J::KIND || d.outcome != Some(jobs_driver::JobState::Completed) {
                continue;
            }
            let value = serde_json::from_value(d.result.unwrap_or(serde_json::Value::Null)).map_err(|e| {
                Error::DependencyResult {
                    kind: J::KIND.into(),
                    reason: format!("the result of job {} does not decode: {e}", d.depends_on),
                }
            })?;
            results.push((d.depends_on, value));
        }
        Ok(results)
    }
}
