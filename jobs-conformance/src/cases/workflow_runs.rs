//! Workflows run by workers (`jobs_core::Workflow`): steps start in dependency order,
//! each as soon as its last dependency completes (the completer settles at once), read
//! their dependencies' results, and a step that waits for a job outside any workflow is
//! released by the leader's settler.

use jobs_core::Workflow;
use jobs_core::driver::{DependsOn, JobState};

use crate::TestDb;
use crate::jobs::{Ledger, record, sum_dependencies};

/// A diamond, A → (B, C) → D, where D sums B's and C's results; then E, which waits for a
/// job enqueued on its own (no workflow: no completion settles it at once), runs after it
/// once the settler has settled it.
pub async fn workers_run_a_workflow_in_order_and_hand_results_on(db: TestDb) {
    let ledger = Ledger::new();
    let mut flow = Workflow::new("diamond");
    let a = flow.add(record::build(ledger.record(1)));
    let b = flow.add_after(record::build(ledger.record(2)), [&a]);
    let c = flow.add_after(record::build(ledger.record(3)), [&a]);
    let d = flow.add_after(sum_dependencies::build(ledger.record(0)), [&b, &c]);
    let enqueued = flow.enqueue(&db.driver).await.expect("enqueue the workflow");
    let outside = record::build(ledger.record(10)).enqueue(&db.driver).await.expect("enqueue a plain job");
    let mut later = Workflow::new("after a plain job");
    let e = later.add_after(sum_dependencies::build(ledger.record(0)), [DependsOn::Job(outside.id)]);
    let later = later.enqueue(&db.driver).await.expect("enqueue the second workflow");

    let handle = db.worker().build().expect("build").start().await.expect("start");
    let done = db.wait_state(enqueued.job(&d), JobState::Completed).await;
    assert_eq!(done.result, Some(serde_json::json!(5)), "D read B's and C's results");
    let waited = db.wait_state(later.job(&e), JobState::Completed).await;
    assert_eq!(waited.result, Some(serde_json::json!(10)));
    handle.shutdown().await.expect("shutdown");

    let runs = ledger.runs();
    let position = |job: i64| runs.iter().position(|r| r.job == job).expect("it ran");
    let (a, b, c, d) = (enqueued.job(&a), enqueued.job(&b), enqueued.job(&c), enqueued.job(&d));
    assert!(position(a) < position(b) && position(a) < position(c), "{runs:?}");
    assert!(position(b) < position(d) && position(c) < position(d), "{runs:?}");
    assert!(position(outside.id) < position(later.job(&e)), "{runs:?}");
    assert_eq!(runs.len(), 6, "each step ran once: {runs:?}");
}
