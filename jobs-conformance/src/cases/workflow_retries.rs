//! Workflows where retries, cancels and deletes meet (`docs/design/workflows.md`, "Retry"):
//! a retry brings back what a dependency's failure cancelled, however long the chain,
//! and only that; a step that ran goes back to waiting when its dependency reruns; a
//! step retried while its dependency still fails it is cancelled again, not stranded; a
//! deleted step leaves no edges; a wide fan-out takes a large result; an eager settle
//! never waits for an application's transaction; a completed dependency is kept on a
//! delete-on-completion queue; a sweep passes over a page an application holds; a step
//! rescued while its dependency reruns waits for it; a whole workflow's retry never makes
//! a step due before its dependency.

use std::time::Duration;

use jobs_core::Action;
use jobs_core::driver::{
    Completion, DependsOn, JobCancelManyParams, JobCompleteManyParams, JobDeleteManyParams,
    JobDependenciesParams, JobFilter, JobRetryManyParams, JobSettleParams, JobState, OnFailure,
};
use jobs_core::maintenance::{Rescuer, RescuerConfig, ServiceContext};
use serde_json::json;

use super::workflows::{claim, finish, insert, settle, states, step, workflow};
use crate::TestDb;
use crate::factory::{JobFactory, insert_all, succeeded};

/// A chain of `n` steps on queues `{name}-0` … in a workflow with `on_failure`.
async fn chain(db: &TestDb, name: &str, n: usize, on_failure: OnFailure) -> Vec<i64> {
    let steps = (0..n)
        .map(|i| {
            let after = if i == 0 { vec![] } else { vec![DependsOn::Step(i - 1)] };
            step(&format!("{name}-{i}"), &after)
        })
        .collect();
    insert(db, &workflow(on_failure, steps)).await
}

async fn retry(db: &TestDb, ids: &[i64]) {
    db.driver.job_retry_many(JobRetryManyParams { ids }).await.expect("retry");
}

fn last_error(job: &jobs_core::driver::JobRow) -> serde_json::Value {
    job.errors.as_array().and_then(|e| e.last()).cloned().unwrap_or_default()
}

/// A chain of 12 in a workflow that cancels: its head discarded, the cascade (longer
/// than one settle's rounds) finishes in the sweep; retrying the head brings all eleven
/// back. A step a person cancelled before its dependency failed stays cancelled, also
/// one a dependency's failure had cancelled before (and its retry brought back). A step
/// retried alone while its dependency still fails it is cancelled again at once (it
/// could never run); retried with that dependency, it waits for it.
pub async fn a_retry_brings_back_what_a_failure_cancelled_and_only_that(db: TestDb) {
    use JobState::{Available, Cancelled, Discarded, Pending};
    let ids = chain(&db, "long", 12, OnFailure::Cancel).await;
    finish(&db, "long-0", ids[0], Discarded, None).await;
    settle(&db, None).await;
    assert_eq!(states(&db, &ids[1..]).await, [Cancelled; 11], "the whole chain is cancelled");
    retry(&db, &ids[..1]).await;
    assert_eq!(states(&db, &ids).await[1..], [Pending; 11], "the whole chain waits again");
    assert_eq!(db.job(ids[0]).await.state, Available);

    // A person cancels the step first; its dependency then fails, and is retried.
    let ids = chain(&db, "person", 2, OnFailure::Cancel).await;
    db.driver.job_cancel_many(JobCancelManyParams { ids: &ids[1..] }).await.expect("cancel");
    finish(&db, "person-0", ids[0], Discarded, None).await;
    retry(&db, &ids[..1]).await;
    assert_eq!(states(&db, &ids).await, [Available, Cancelled], "a person's cancel stands");

    // Cancelled by its dependency's failure and brought back by its retry, then cancelled
    // by a person (its last error entry still names the dependency): the dependency's
    // next failure and retry leave the person's cancel standing.
    let ids = chain(&db, "again", 2, OnFailure::Cancel).await;
    finish(&db, "again-0", ids[0], Discarded, None).await;
    retry(&db, &ids[..1]).await;
    assert_eq!(states(&db, &ids).await, [Available, Pending]);
    db.driver.job_cancel_many(JobCancelManyParams { ids: &ids[1..] }).await.expect("cancel");
    finish(&db, "again-0", ids[0], Discarded, None).await;
    retry(&db, &ids[..1]).await;
    assert_eq!(states(&db, &ids).await, [Available, Cancelled], "a person's second cancel stands");

    // The dependent retried alone: cancelled again, naming the dependency.
    let ids = chain(&db, "alone", 2, OnFailure::Cancel).await;
    finish(&db, "alone-0", ids[0], Discarded, None).await;
    let errors_before = db.job(ids[1]).await.errors.as_array().map_or(0, Vec::len);
    retry(&db, &ids[1..]).await;
    let b = db.job(ids[1]).await;
    assert_eq!(b.state, Cancelled, "retried while its dependency still fails it");
    assert_eq!(b.errors.as_array().map_or(0, Vec::len), errors_before + 1);
    assert_eq!(last_error(&b)["dependency"], json!(ids[0]), "{}", last_error(&b));
    // Retried with its dependency: it waits for it, then runs.
    retry(&db, &ids).await;
    assert_eq!(states(&db, &ids).await, [Available, Pending]);
    let b = db.job(ids[1]).await;
    assert_eq!(b.errors.as_array().map_or(0, Vec::len), errors_before + 1, "not cancelled on the way");
    finish(&db, "alone-0", ids[0], JobState::Completed, None).await;
    assert_eq!(db.job(ids[1]).await.state, Available);
}

/// A step that ran and waits to run again (`retryable`) goes back to `pending` when its
/// dependency is retried, and is released when the dependency completes again. A step
/// running while its dependency is retried, and failing after, waits in `pending` too.
pub async fn a_step_waiting_to_rerun_waits_for_its_retried_dependency(db: TestDb) {
    use JobState::{Available, Completed, Pending, Retryable};
    for failed_before_the_retry in [true, false] {
        let ids = chain(&db, "rerun", 2, OnFailure::Cancel).await;
        finish(&db, "rerun-0", ids[0], Completed, None).await;
        let b = claim(&db, "rerun-1", ids[1]).await;
        let failed =
            Completion { state: Retryable, delay_ms: Some(0), ..succeeded(ids[1], "rerun-1", b.attempt) };
        let fail = || async {
            db.driver
                .job_complete_many(JobCompleteManyParams {
                    completions: std::slice::from_ref(&failed),
                    now: None,
                })
                .await
                .expect("fail the step")
        };
        if failed_before_the_retry {
            fail().await;
            assert_eq!(db.job(ids[1]).await.state, Retryable);
            retry(&db, &ids[..1]).await;
        } else {
            retry(&db, &ids[..1]).await;
            assert_eq!(fail().await, vec![ids[1]]);
        }
        assert_eq!(states(&db, &ids).await, [Available, Pending], "it waits for its dependency's rerun");
        finish(&db, "rerun-0", ids[0], Completed, None).await;
        let b = db.job(ids[1]).await;
        assert!(matches!(b.state, Available | JobState::Scheduled), "{:?}", b.state);
        db.driver.job_delete_many(JobDeleteManyParams { ids: &ids }).await.expect("clear the queues");
    }
}

/// A deleted step takes its edges with it; a step depending on a job with a large result
/// (64 KiB) in a fan-out of 1,000 is inserted (the edges go in batches bounded by bytes:
/// one statement would exceed MariaDB's default packet of 16 MiB), each reading it.
pub async fn deleted_steps_leave_no_edges_and_wide_fan_outs_take_large_results(db: TestDb) {
    let ids = chain(&db, "gone", 2, OnFailure::Cancel).await;
    finish(&db, "gone-0", ids[0], JobState::Completed, None).await;
    db.driver.job_delete_many(JobDeleteManyParams { ids: &ids[1..] }).await.expect("delete");
    let edges = db.driver.job_dependencies(JobDependenciesParams { job_id: ids[1] }).await.expect("edges");
    assert!(edges.is_empty(), "a deleted step's edges: {edges:?}");

    let big = json!({ "rows": "r".repeat(64 * 1024) });
    let root = insert_all(&*db.driver, vec![JobFactory::new("k").queue("big")]).await[0];
    let job = claim(&db, "big", root).await;
    let done = Completion { result: Some(big.to_string()), ..succeeded(root, "big", job.attempt) };
    db.driver
        .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
        .await
        .expect("complete");
    let steps = (0..1_000).map(|_| step("wide", &[DependsOn::Job(root)])).collect();
    let fan = insert(&db, &workflow(OnFailure::Cancel, steps)).await;
    assert_eq!(db.count(Some(JobState::Available)).await, 1_000);
    for id in [fan[0], fan[999]] {
        let edges = db.driver.job_dependencies(JobDependenciesParams { job_id: id }).await.expect("edges");
        assert_eq!(edges.len(), 1);
        assert_eq!(edges[0].result.as_ref(), Some(&big), "step {id} reads the result");
    }
}

/// A completion's settle never waits for an application's transaction that holds a
/// dependent (no lock timeout would end the wait): it leaves that dependent to the
/// sweep, which settles it once the transaction ends. (Needs row locks a statement can
/// skip: where one writer at a time holds the file, the transaction holds it all.)
pub async fn an_eager_settle_never_waits_for_an_application_transaction(db: TestDb) {
    let ids = chain(&db, "held", 2, OnFailure::Cancel).await;
    let job = claim(&db, "held-0", ids[0]).await;
    let mut tx = db.app_transaction().await;
    // The application's transaction locks the dependent (an insert of a job after it
    // would too), and stays open.
    tx.cancel(&ids[1..]).await.expect("cancel in the transaction");
    let done = succeeded(ids[0], "held-0", job.attempt);
    db.driver
        .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
        .await
        .expect("complete");
    // A deadline far beyond any settle's time: the old settle waited for ever.
    tokio::time::timeout(Duration::from_secs(30), settle(&db, Some(&ids[..1])))
        .await
        .expect("the settle waited for the application's transaction");
    tx.rollback().await.expect("roll back");
    assert_eq!(db.job(ids[1]).await.state, JobState::Pending, "left to the sweep");
    assert_eq!(settle(&db, None).await.released, 1);
    assert_eq!(db.job(ids[1]).await.state, JobState::Available);
}

/// A step completed on a delete-on-completion queue is kept (completed) while a job
/// depends on it, so that its dependent reads that it completed (a job gone reads as
/// cancelled, which would cancel the rest of the workflow); a job nothing depends on
/// goes.
pub async fn a_completed_dependency_is_kept_on_a_delete_on_completion_queue(db: TestDb) {
    let ids = chain(&db, "deleting", 2, OnFailure::Cancel).await;
    let alone = insert_all(&*db.driver, vec![JobFactory::new("k").queue("deleting-alone")]).await[0];
    let mut done = Vec::new();
    for (id, queue) in [(ids[0], "deleting-0"), (alone, "deleting-alone")] {
        let job = claim(&db, queue, id).await;
        done.push(Completion { delete: true, ..succeeded(id, queue, job.attempt) });
    }
    let applied = db
        .driver
        .job_complete_many(JobCompleteManyParams { completions: &done, now: None })
        .await
        .expect("complete");
    assert_eq!(applied.len(), 2, "both outcomes applied: {applied:?}");
    settle(&db, Some(&[ids[0]])).await;
    assert_eq!(db.job(ids[0]).await.state, JobState::Completed, "kept for its dependent");
    assert_eq!(db.job(ids[1]).await.state, JobState::Available, "it read that its dependency completed");
    let gone = db.driver.job_get(jobs_core::driver::JobGetParams { id: alone }).await.expect("read");
    assert!(gone.is_none(), "a job nothing depends on is deleted");
}

/// A sweep's page that an application's transaction holds (it locked a dependent) fails
/// after the lock wait and is passed over: the next page settles, and the held one once
/// the transaction ends (no page stops the sweep for the pages after it, and no sweep
/// waits without end). (Needs row locks: where one writer at a time holds the file, the
/// transaction holds every page.)
pub async fn a_sweep_passes_over_a_page_an_application_holds(db: TestDb) {
    use JobState::{Available, Pending};
    let queues = ["swept-a", "swept-b"];
    let deps = insert_all(&*db.driver, queues.iter().map(|q| JobFactory::new("k").queue(q)).collect()).await;
    let steps = deps.iter().map(|d| step("swept-after", &[DependsOn::Job(*d)])).collect();
    let after = insert(&db, &workflow(OnFailure::Cancel, steps)).await;
    // Both finish, and nothing settles them (a crash between a completion and its settle).
    for (id, queue) in deps.iter().zip(queues) {
        let job = claim(&db, queue, *id).await;
        let done = succeeded(*id, queue, job.attempt);
        let params = JobCompleteManyParams { completions: &[done], now: None };
        db.driver.job_complete_many(params).await.expect("complete");
    }
    let mut tx = db.app_transaction().await;
    let lock = format!("UPDATE jobs SET priority = priority WHERE id = {}", after[0]);
    tx.execute(&lock).await.expect("the application locks a dependent");
    let sweep = async {
        let (mut from, mut released) = (0, 0);
        loop {
            let params = JobSettleParams { finished: None, after: from, limit: 1, now: None };
            let page = db.driver.job_settle(params).await.expect("a page's failure never fails the sweep");
            released += page.released;
            match page.next {
                Some(next) => from = next,
                None => return released,
            }
        }
    };
    let released = tokio::time::timeout(Duration::from_secs(60), sweep)
        .await
        .expect("the sweep waited for the application's transaction");
    assert_eq!(released, 1, "the page after the held one");
    assert_eq!(states(&db, &after).await, [Pending, Available]);
    tx.rollback().await.expect("roll back");
    assert_eq!(settle(&db, None).await.released, 1);
    assert_eq!(db.job(after[0]).await.state, Available);
}

/// A step running while its dependency is retried, whose node is then lost, goes back
/// to `pending`, not `available`: rescued, it waits for the dependency's rerun like a
/// step that failed (it would otherwise run before its dependency, on the old result).
pub async fn a_rescued_step_waits_for_its_retried_dependency(db: TestDb) {
    use JobState::{Available, Completed, Pending};
    let ids = chain(&db, "rescued", 2, OnFailure::Cancel).await;
    finish(&db, "rescued-0", ids[0], Completed, None).await;
    claim(&db, "rescued-1", ids[1]).await;
    retry(&db, &ids[..1]).await;
    // The step's node ("flow-node") never beat: the rescuer finds it lost.
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer-node");
    let rescued = Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue");
    assert!(rescued.contains(&ids[1]), "the step is rescued: {rescued:?}");
    let b = db.job(ids[1]).await;
    assert_eq!((b.state, b.errors[0]["error_type"].clone()), (Pending, json!("rescued_node_lost")));
    finish(&db, "rescued-0", ids[0], Completed, None).await;
    assert_eq!(db.job(ids[1]).await.state, Available, "released by the dependency's rerun");
}

/// A step running while its dependency is retried and then fails, whose own run then
/// fails, is handed back or is lost, never runs again past that dependency: in a
/// workflow that cancels on failure it is cancelled by that very write, naming the
/// dependency, and so is what waits for it; in one that holds, they wait in `pending`. A
/// retry of the dependency, which then completes, brings the chain back and lets it run.
pub async fn a_step_a_dependency_failed_while_it_ran_never_runs_past_it(db: TestDb) {
    use JobState::{Available, Cancelled, Completed, Discarded, Pending, Retryable, Running};
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Ends {
        Fails,
        HandedBack,
        Lost,
    }
    let ends = [Ends::Fails, Ends::HandedBack, Ends::Lost];
    let shapes = ends.into_iter().flat_map(|e| [(OnFailure::Cancel, e), (OnFailure::Hold, e)]);
    for (n, (on_failure, ends)) in shapes.enumerate() {
        let name = format!("failed-under-{n}");
        let (first, second) = (format!("{name}-0"), format!("{name}-1"));
        let ids = chain(&db, &name, 3, on_failure).await;
        finish(&db, &first, ids[0], Completed, None).await;
        let running = claim(&db, &second, ids[1]).await;
        retry(&db, &ids[..1]).await;
        finish(&db, &first, ids[0], Discarded, None).await;
        assert_eq!(db.job(ids[1]).await.state, Running, "a running step runs on");
        if ends == Ends::Lost {
            // The step's node ("flow-node") never beat: the rescuer finds it lost.
            let ctx = ServiceContext::new(db.driver.clone(), "rescuer-node");
            let rescued = Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue");
            assert!(rescued.contains(&ids[1]), "the step is rescued: {rescued:?}");
        } else {
            let ran = succeeded(ids[1], &second, running.attempt);
            let outcome = match ends {
                Ends::Fails => Completion { state: Retryable, delay_ms: Some(0), ..ran },
                _ => Completion { state: Available, give_back_attempt: true, ..ran },
            };
            let params = JobCompleteManyParams { completions: std::slice::from_ref(&outcome), now: None };
            assert_eq!(db.driver.job_complete_many(params).await.expect("end the run"), vec![ids[1]]);
        }
        let step = db.job(ids[1]).await;
        if on_failure == OnFailure::Cancel {
            assert_eq!(step.state, Cancelled, "{ends:?}");
            let entry = last_error(&step);
            assert_eq!(
                (entry["error_type"].clone(), entry["dependency"].clone()),
                (json!("dependency_failed"), json!(ids[0]))
            );
        } else {
            assert_eq!(step.state, Pending, "held for a person ({ends:?})");
        }
        // The settler's sweep settles what waits for it (the completer settled a failure
        // already): cancelled in turn, or still waiting.
        settle(&db, None).await;
        let third = if on_failure == OnFailure::Cancel { Cancelled } else { Pending };
        assert_eq!(db.job(ids[2]).await.state, third, "{ends:?}");
        retry(&db, &ids[..1]).await;
        assert_eq!(states(&db, &ids).await, [Available, Pending, Pending], "the chain waits for its head");
        finish(&db, &first, ids[0], Completed, None).await;
        assert_eq!(states(&db, &ids).await, [Completed, Available, Pending], "released by the head's rerun");
        db.driver.job_delete_many(JobDeleteManyParams { ids: &ids }).await.expect("clear the queues");
    }
}

/// A whole workflow's retry (the dashboard's bulk retry of `/jobs?workflow=ID`, which
/// reads in pages smaller than the workflow) never makes a step due while its dependency
/// is still completed from before: the members go in one call. An application's
/// transaction holds the oldest member meanwhile, so the retry waits for it: a retry a
/// page at a time would by then have committed the newer page, making its first step due
/// (and a worker would run it before its dependency reran). (Needs row locks: where one
/// writer at a time holds the file, the transaction holds it all.)
pub async fn a_whole_workflows_retry_never_makes_a_step_due_before_its_dependency(db: TestDb) {
    use JobState::{Available, Completed, Discarded, Pending};
    let flow = workflow(
        OnFailure::Hold,
        vec![
            step("whole-held", &[]),
            step("whole-0", &[]),
            step("whole-1", &[DependsOn::Step(1)]),
            step("whole-2", &[DependsOn::Step(2)]),
        ],
    );
    let ids = insert(&db, &flow).await;
    finish(&db, "whole-held", ids[0], Discarded, None).await;
    for (i, queue) in ["whole-0", "whole-1", "whole-2"].into_iter().enumerate() {
        finish(&db, queue, ids[i + 1], Completed, None).await;
    }
    let workflow_id = db.job(ids[0]).await.workflow_id.expect("a step names its workflow");

    let mut tx = db.app_transaction().await;
    tx.retry(&ids[..1]).await.expect("retry the oldest member in the transaction");
    let driver = db.driver.clone();
    let mut retrying = tokio::spawn(async move {
        let filter = JobFilter { workflow: Some(workflow_id), ..JobFilter::default() };
        Action::Retry.apply_to_matching(&*driver, &filter, 2).await
    });
    let early = tokio::time::timeout(Duration::from_secs(1), &mut retrying).await;
    assert!(early.is_err(), "the retry waits for the member the transaction holds: {early:?}");
    assert_eq!(db.job(ids[2]).await.state, Completed, "no step is due before its dependency's retry");
    tx.commit().await.expect("commit");
    retrying.await.expect("the retry's task").expect("retry the workflow");
    assert_eq!(states(&db, &ids).await, [Available, Available, Pending, Pending]);
}
