//! Workflows in the model: chains of steps enqueued after existing jobs, settled as the
//! completer and the settler settle them, and the invariants of their edges: an edge is
//! settled only while its dependency is finished (a retry re-opens it); a `pending`
//! job waits for something (an unsettled edge, or a failed one it is held on); a released
//! job (`available`, `scheduled`) waits for nothing; once the settler has run, no
//! `pending` job could have been released, and none of a workflow that cancels is still
//! failed by a dependency (a step retried while a dependency still fails it is cancelled
//! again); a deleted job leaves no edges in.

use std::collections::HashMap;

use jobs_core::driver::{
    DependsOn, JobDependenciesParams, JobGetParams, JobInsertWorkflowParams, JobRow, JobSettleParams,
    JobState, Needs, NewJob, NewStep, NewWorkflow, OnFailure,
};

use super::ops::{Op, QUEUES};
use super::system::System;

impl System {
    /// Enqueues a chain of `steps` steps on `queue`, the first after `after`; returns the
    /// new jobs' ids.
    pub(super) fn enqueue_workflow(
        &mut self,
        queue: usize,
        after: &[i64],
        steps: u8,
        hold: bool,
    ) -> Vec<i64> {
        let steps = (0..usize::from(steps))
            .map(|i| NewStep {
                job: NewJob::new("model.step", QUEUES[queue], "{}"),
                after: if i == 0 {
                    after.iter().map(|id| DependsOn::Job(*id)).collect()
                } else {
                    vec![DependsOn::Step(i - 1)]
                },
                needs: Needs::Completed,
            })
            .collect();
        let on_failure = if hold { OnFailure::Hold } else { OnFailure::Cancel };
        let workflow = NewWorkflow { name: "model".into(), on_failure, steps };
        let params = JobInsertWorkflowParams { workflow: &workflow, now: Some(self.now) };
        let inserted = self.block(self.driver().job_insert_workflow(params)).expect("enqueue a workflow");
        self.workflows.insert(inserted.id, hold);
        inserted.jobs.iter().filter(|j| !j.existing).map(|j| j.id).collect()
    }

    /// Settles the finish of `job` (the completer's), or every finish nothing settled yet
    /// (`None`: the settler's sweep, in pages of three dependencies, from the start to the
    /// end of the unsettled edges).
    pub(super) fn settle(&self, job: Option<i64>) {
        let ids = job.map(|id| vec![id]);
        let mut after = 0;
        loop {
            let params = JobSettleParams { finished: ids.as_deref(), after, limit: 3, now: Some(self.now) };
            let page = self.block(self.driver().job_settle(params)).expect("settle");
            match page.next {
                Some(next) if job.is_none() => after = next,
                _ => return,
            }
        }
    }

    /// A job a delete took leaves no edges into it.
    pub(super) fn check_deleted_edges(&self, id: i64) {
        let row = self.block(self.driver().job_get(JobGetParams { id })).expect("get");
        let edges =
            self.block(self.driver().job_dependencies(JobDependenciesParams { job_id: id })).expect("deps");
        assert!(row.is_some() || edges.is_empty(), "deleted job {id} keeps its edges: {edges:?}");
    }

    /// The invariants of the workflows' edges, on the rows read after `op`.
    pub(super) fn check_workflows(&self, op: &Op, now: &HashMap<i64, JobRow>) {
        for row in now.values().filter(|r| r.workflow_id.is_some()) {
            let params = JobDependenciesParams { job_id: row.id };
            let edges = self.block(self.driver().job_dependencies(params)).expect("dependencies");
            // An edge is settled only while its dependency is finished (or gone): a retried
            // dependency re-opens its edges.
            for e in edges.iter().filter(|e| e.outcome.is_some()) {
                assert!(
                    now.get(&e.depends_on).is_none_or(|d| d.state.is_final()),
                    "job {}'s edge on {} is settled while that job is {} (after {op:?})",
                    row.id,
                    e.depends_on,
                    now[&e.depends_on].state
                );
            }
            // Released, or waiting to run again: it waits for nothing (a retried dependency
            // sends it back to `pending`).
            if !matches!(
                row.state,
                JobState::Pending | JobState::Available | JobState::Scheduled | JobState::Retryable
            ) {
                continue;
            }
            let unsettled = edges.iter().filter(|e| e.outcome.is_none()).count();
            let failed = edges.iter().filter(|e| e.outcome.is_some_and(|o| !e.needs.met_by(o))).count();
            let id = row.id;
            match row.state {
                JobState::Pending => {
                    assert!(
                        unsettled + failed > 0,
                        "job {id} is pending for nothing (after {op:?}): {edges:?}"
                    );
                    if matches!(op, Op::Settle) {
                        assert!(unsettled > 0 || failed > 0, "job {id} could have been released: {edges:?}");
                        let holds =
                            row.workflow_id.and_then(|w| self.workflows.get(&w)).copied().unwrap_or(false);
                        assert!(
                            holds || failed == 0,
                            "job {id} of a workflow that cancels is still pending on a failed dependency \
                             after the settler ran: {edges:?}"
                        );
                        let finished = |e: &jobs_core::driver::Dependency| {
                            now.get(&e.depends_on).is_none_or(|d| d.state.is_final())
                        };
                        assert!(
                            edges.iter().filter(|e| e.outcome.is_none()).all(|e| !finished(e)),
                            "job {id} waits on a finished dependency after the settler ran: {edges:?}"
                        );
                    }
                }
                _ => assert!(
                    unsettled == 0 && failed == 0,
                    "job {id} is {} while it waits for a dependency (after {op:?}): {edges:?}",
                    row.state
                ),
            }
        }
    }
}
