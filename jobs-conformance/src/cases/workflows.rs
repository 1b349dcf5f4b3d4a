//! Workflows at the driver's seam (`docs/design/workflows.md`): steps wait `pending` for
//! their dependencies, are released when the last completes, are cancelled or held when
//! one fails, come back when it is retried, read their dependencies' results; the
//! settler's sweep settles what no completion did.

use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{
    ClaimedJob, Completion, DependsOn, DriverError, InsertedWorkflow, JobCancelManyParams, JobClaimParams,
    JobCompleteManyParams, JobDeleteManyParams, JobDependenciesParams, JobInsertWorkflowParams,
    JobPruneParams, JobRetryManyParams, JobSettleParams, JobState, Needs, NewJob, NewStep, NewWorkflow,
    OnFailure, WorkflowError,
};
use serde_json::json;

use crate::TestDb;
use crate::factory::{JobFactory, insert_all, succeeded};

/// A step of kind `step` on queue `queue`, after `after`.
pub(super) fn step(queue: &str, after: &[DependsOn]) -> NewStep {
    NewStep { job: NewJob::new("step", queue, "{}"), after: after.to_vec(), needs: Needs::Completed }
}

pub(super) fn workflow(on_failure: OnFailure, steps: Vec<NewStep>) -> NewWorkflow {
    NewWorkflow { name: "flow".into(), on_failure, steps }
}

pub(super) async fn insert(db: &TestDb, flow: &NewWorkflow) -> Vec<i64> {
    let inserted: InsertedWorkflow = db
        .driver
        .job_insert_workflow(JobInsertWorkflowParams { workflow: flow, now: None })
        .await
        .expect("insert the workflow");
    inserted.jobs.iter().map(|j| j.id).collect()
}

/// Claims the one job of `queue` (it must be `id`: nothing else is available there).
pub(super) async fn claim(db: &TestDb, queue: &str, id: i64) -> ClaimedJob {
    let params = JobClaimParams {
        queue,
        limit: 10,
        node: "flow-node",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    let claimed = db.driver.job_claim(params).await.expect("claim");
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id], "what {queue} offers");
    claimed.into_iter().next().expect("one job")
}

/// Runs job `id` of `queue` to `state` (with `result` when it completes), then settles it
/// as the completer does.
pub(super) async fn finish(
    db: &TestDb,
    queue: &str,
    id: i64,
    state: JobState,
    result: Option<serde_json::Value>,
) {
    let job = claim(db, queue, id).await;
    assert!(job.workflow_id.is_some(), "a step's claim names its workflow");
    let completion =
        Completion { state, result: result.map(|r| r.to_string()), ..succeeded(id, queue, job.attempt) };
    let applied = db
        .driver
        .job_complete_many(JobCompleteManyParams { completions: &[completion], now: None })
        .await
        .expect("complete");
    assert_eq!(applied, vec![id]);
    settle(db, Some(&[id])).await;
}

/// Settles `finished` (the completer's settle), or (`None`) sweeps every page of the
/// unsettled edges (the settler's passes, until one reaches the end).
pub(super) async fn settle(db: &TestDb, finished: Option<&[i64]>) -> jobs_core::driver::Settled {
    let mut done = jobs_core::driver::Settled::default();
    let mut after = 0;
    loop {
        let params = JobSettleParams { finished, after, limit: 100, now: None };
        let page = db.driver.job_settle(params).await.expect("settle");
        done.settled += page.settled;
        done.released += page.released;
        done.cancelled += page.cancelled;
        match page.next {
            Some(next) if finished.is_none() => after = next,
            _ => return done,
        }
    }
}

pub(super) async fn states(db: &TestDb, ids: &[i64]) -> Vec<JobState> {
    let mut states = Vec::new();
    for id in ids {
        states.push(db.job(*id).await.state);
    }
    states
}

/// A diamond, A → (B, C) → D: B and C wait for A, D for both; each is released when its
/// last dependency completes (not before), and reads its dependencies' results, also
/// once the dependency is gone.
pub async fn a_diamond_workflow_runs_in_dependency_order(db: TestDb) {
    use JobState::{Available, Completed, Pending};
    let (a, b, c) = (DependsOn::Step(0), DependsOn::Step(1), DependsOn::Step(2));
    let flow = workflow(
        OnFailure::Cancel,
        vec![step("a", &[]), step("b", &[a]), step("c", &[a]), step("d", &[b, c])],
    );
    let ids = insert(&db, &flow).await;
    assert_eq!(states(&db, &ids).await, [Available, Pending, Pending, Pending]);
    let workflow_id = db.job(ids[0]).await.workflow_id;
    assert!(workflow_id.is_some());
    for id in &ids {
        assert_eq!(db.job(*id).await.workflow_id, workflow_id, "every step is in the workflow");
    }
    let none_pending = JobClaimParams {
        queue: "d",
        limit: 10,
        node: "n",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    assert!(
        db.driver.job_claim(none_pending).await.expect("claim").is_empty(),
        "a pending job is never claimed"
    );

    finish(&db, "a", ids[0], Completed, Some(json!({"rows": 3}))).await;
    assert_eq!(states(&db, &ids).await, [Completed, Available, Available, Pending]);
    finish(&db, "b", ids[1], Completed, Some(json!("b done"))).await;
    assert_eq!(states(&db, &ids[3..]).await, [Pending], "D still waits for C");
    finish(&db, "c", ids[2], Completed, None).await;
    assert_eq!(states(&db, &ids[3..]).await, [Available]);

    let deps = db.driver.job_dependencies(JobDependenciesParams { job_id: ids[3] }).await.expect("deps");
    let read: Vec<_> = deps.iter().map(|d| (d.depends_on, d.outcome, d.result.clone())).collect();
    assert_eq!(read, vec![(ids[1], Some(Completed), Some(json!("b done"))), (ids[2], Some(Completed), None)]);
    // The result stays with the edge when the dependency goes.
    db.driver.job_delete_many(JobDeleteManyParams { ids: &[ids[0]] }).await.expect("delete");
    let deps = db.driver.job_dependencies(JobDependenciesParams { job_id: ids[1] }).await.expect("deps");
    assert_eq!(deps[0].result, Some(json!({"rows": 3})));
    assert_eq!(settle(&db, None).await.settled, 0, "nothing is left to settle");
    // Pruned, a job's own dependencies go with it.
    let pruned = db
        .driver
        .job_prune(JobPruneParams { state: Completed, retention: Duration::ZERO, limit: 100, now: None })
        .await
        .expect("prune");
    assert_eq!(pruned, 2, "B and C (A was deleted, D has not run)");
    for id in &ids[1..3] {
        let left = db.driver.job_dependencies(JobDependenciesParams { job_id: *id }).await.expect("deps");
        assert!(left.is_empty(), "job {id}'s edges went with it: {left:?}");
    }
    let kept = db.driver.job_dependencies(JobDependenciesParams { job_id: ids[3] }).await.expect("deps");
    assert_eq!(kept.len(), 2, "D keeps its edges on B and C, and B's result: {kept:?}");
    assert_eq!(kept[0].result, Some(json!("b done")));
}

/// A → B → C, A discarded: with `Cancel`, B and C are cancelled (each naming the
/// dependency that failed it); with `Hold`, both stay pending. Retrying A brings them
/// back and the workflow runs to its end.
pub async fn a_failed_dependency_cancels_or_holds_and_a_retry_resumes(db: TestDb) {
    use JobState::{Available, Cancelled, Completed, Discarded, Pending};
    for (on_failure, queue) in [(OnFailure::Cancel, "cancel"), (OnFailure::Hold, "hold")] {
        let q = |s: &str| format!("{queue}-{s}");
        let (qa, qb, qc) = (q("a"), q("b"), q("c"));
        let flow = workflow(
            on_failure,
            vec![step(&qa, &[]), step(&qb, &[DependsOn::Step(0)]), step(&qc, &[DependsOn::Step(1)])],
        );
        let ids = insert(&db, &flow).await;
        finish(&db, &qa, ids[0], Discarded, None).await;
        let after = if on_failure == OnFailure::Cancel { Cancelled } else { Pending };
        assert_eq!(states(&db, &ids).await, [Discarded, after, after], "{on_failure:?}");
        if on_failure == OnFailure::Cancel {
            let b = db.job(ids[1]).await;
            let entry = b.errors.as_array().and_then(|e| e.last()).cloned().unwrap_or_default();
            assert_eq!(entry["error_type"], json!("dependency_failed"), "{entry}");
            assert_eq!(entry["dependency"], json!(ids[0]));
            assert!(b.finalized_at.is_some());
            assert_eq!(
                db.job(ids[2])
                    .await
                    .errors
                    .as_array()
                    .and_then(|e| e.last())
                    .map(|e| e["dependency"].clone()),
                Some(json!(ids[1]))
            );
        }
        let retried = db.driver.job_retry_many(JobRetryManyParams { ids: &[ids[0]] }).await.expect("retry");
        assert_eq!(retried.retried, 1);
        assert_eq!(states(&db, &ids).await, [Available, Pending, Pending], "{on_failure:?}: back to waiting");
        finish(&db, &qa, ids[0], Completed, None).await;
        finish(&db, &qb, ids[1], Completed, None).await;
        finish(&db, &qc, ids[2], Completed, None).await;
        assert_eq!(states(&db, &ids).await, [Completed, Completed, Completed]);
    }
}

/// Dependencies on existing jobs: one that is gone is refused and nothing is written; a
/// step that waits may not be unique; a dependency already completed counts at once (the
/// step is due), one already failed cancels the step at once; a running one's success
/// waits for the insert's transaction and is kept for the step, also on a
/// delete-on-completion queue; a finish no completion settled (a person's cancel, a
/// crash before the settle) is settled by the settler's sweep.
pub async fn workflow_steps_may_depend_on_existing_jobs(db: TestDb) {
    use JobState::{Available, Cancelled, Completed, Discarded, Pending};
    let now = Utc::now();
    let existing = insert_all(
        &*db.driver,
        vec![
            JobFactory::new("k").state(Completed, now),
            JobFactory::new("k").attempts(1, 1).state(Discarded, now),
            JobFactory::new("k").queue("running").state(Available, now),
        ],
    )
    .await;
    let before = db.all_jobs().await.len();
    let unknown =
        workflow(OnFailure::Cancel, vec![step("x", &[]), step("x", &[DependsOn::Job(existing[2] + 1000)])]);
    let refused =
        db.driver.job_insert_workflow(JobInsertWorkflowParams { workflow: &unknown, now: None }).await;
    assert!(
        matches!(refused, Err(DriverError::Workflow(WorkflowError::UnknownDependency(id))) if id == existing[2] + 1000),
        "{refused:?}"
    );
    let mut unique = step("x", &[DependsOn::Job(existing[0])]);
    unique.job.unique = Some((vec![1; 32], JobState::DEFAULT_UNIQUE.to_vec()));
    let refused = db
        .driver
        .job_insert_workflow(JobInsertWorkflowParams {
            workflow: &workflow(OnFailure::Cancel, vec![unique]),
            now: None,
        })
        .await;
    assert!(
        matches!(refused, Err(DriverError::Workflow(WorkflowError::UniqueWithDependencies(0)))),
        "{refused:?}"
    );
    assert_eq!(db.all_jobs().await.len(), before, "a refused workflow writes nothing");

    let flow = workflow(
        OnFailure::Cancel,
        vec![step("done", &[DependsOn::Job(existing[0])]), step("failed", &[DependsOn::Job(existing[1])])],
    );
    let ids = insert(&db, &flow).await;
    assert_eq!(states(&db, &ids).await, [Available, Cancelled]);

    // The dependency is running, on a delete-on-completion queue, when an application's
    // transaction adds a step after it. Its success waits for that transaction (the
    // insert locked it, and on Postgres marked it), then keeps it, completed, for the
    // step to read: gone, it would read as cancelled and cancel the step. (The
    // completion has a second to finish before the commit: nothing else holds the job;
    // where writers take turns, the transaction holds the file.)
    let running = claim(&db, "running", existing[2]).await;
    let mut tx = db.app_transaction().await;
    let late = tx
        .insert_workflow(&workflow(OnFailure::Cancel, vec![step("late", &[DependsOn::Job(existing[2])])]))
        .await
        .expect("insert in the transaction")
        .jobs[0]
        .id;
    let completion = Completion { delete: true, ..succeeded(existing[2], "running", running.attempt) };
    let driver = db.driver.clone();
    let mut completing = tokio::spawn(async move {
        driver.job_complete_many(JobCompleteManyParams { completions: &[completion], now: None }).await
    });
    let early = tokio::time::timeout(Duration::from_secs(1), &mut completing).await;
    assert!(
        early.is_err(),
        "the success of a job a step was just added after waits for the commit: {early:?}"
    );
    tx.commit().await.expect("commit");
    let applied = completing.await.expect("the completion's task").expect("complete");
    assert_eq!(applied, vec![existing[2]]);
    assert_eq!(db.job(existing[2]).await.state, Completed, "kept for its dependent");
    settle(&db, Some(&[existing[2]])).await;
    assert_eq!(db.job(late).await.state, Available, "its dependency completed");

    // Finishes that no completion settled: a step's dependency deleted, another's cancelled.
    let flow = workflow(OnFailure::Hold, vec![step("p", &[]), step("q", &[DependsOn::Step(0)])]);
    let ids = insert(&db, &flow).await;
    db.driver.job_delete_many(JobDeleteManyParams { ids: &[ids[0]] }).await.expect("delete");
    assert_eq!(db.job(ids[1]).await.state, Pending, "held: its dependency is gone");
    let deps = db.driver.job_dependencies(JobDependenciesParams { job_id: ids[1] }).await.expect("deps");
    assert_eq!(deps[0].outcome, Some(Cancelled), "a dependency that is gone settles as cancelled");
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[ids[1]] }).await.expect("cancel the held step");
    db.driver.job_retry_many(JobRetryManyParams { ids: &[ids[1]] }).await.expect("retry it");
    assert_eq!(db.job(ids[1]).await.state, Pending, "a retry does not skip a failed dependency");
}
