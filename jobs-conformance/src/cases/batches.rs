//! Batches at the driver's seam (`docs/design/workflows.md`): a callback that waits for
//! the seal and for every member, whatever each member's end, released exactly once;
//! members added over time, in the application's transaction too; typed refusals.

use jobs_core::driver::{
    BatchChange, BatchChanged, BatchTarget, DriverError, JobBatchParams, JobCancelManyParams,
    JobDependenciesParams, JobState, Needs, NewJob, OnFailure, WorkflowError,
};

use super::workflows::{finish, insert, settle, states, step, workflow};
use crate::TestDb;

fn member(queue: &str) -> NewJob {
    NewJob::new("member", queue, "{}")
}

async fn change(db: &TestDb, target: BatchTarget, members: Vec<NewJob>, seal: bool) -> BatchChanged {
    try_change(db, target, members, seal).await.expect("change the batch")
}

async fn try_change(
    db: &TestDb,
    target: BatchTarget,
    members: Vec<NewJob>,
    seal: bool,
) -> Result<BatchChanged, DriverError> {
    let change = BatchChange { target, members, seal };
    db.driver.job_batch(JobBatchParams { change: &change, now: None }).await
}

/// The members' ends, as the callback's edges read them: (completed, discarded, cancelled).
async fn counts(db: &TestDb, callback: i64) -> (usize, usize, usize) {
    let edges = db.driver.job_dependencies(JobDependenciesParams { job_id: callback }).await.expect("edges");
    assert!(edges.iter().all(|e| e.needs == Needs::Finished));
    let n = |s: JobState| edges.iter().filter(|e| e.outcome == Some(s)).count();
    (n(JobState::Completed), n(JobState::Discarded), n(JobState::Cancelled))
}

/// A batch opened with three members and filled later: its callback waits, `pending`,
/// while members finish (completed, discarded, cancelled) and until the seal; members
/// join over time (one whose uniqueness key a member holds joins as that member, once);
/// a sealed batch refuses members, writing nothing; the last member's finish releases the
/// callback once, and the callback's edges count how the members ended. An unknown
/// batch, or a workflow that is not a batch, is refused; a batch sealed empty is due at
/// once; a batch opened in a transaction that rolls back never existed.
pub async fn a_batch_calls_back_once_when_sealed_and_every_member_finished(db: TestDb) {
    use JobState::{Available, Completed, Discarded, Pending};
    let callback = NewJob::new("callback", "callback", "{}");
    let opened = change(
        &db,
        BatchTarget::New { name: "newsletter".into(), callback: Box::new(callback.clone()) },
        vec![member("m0"), member("m1"), member("m2")],
        false,
    )
    .await;
    let (batch, cb) = (opened.batch_id, opened.callback_id);
    let ids: Vec<i64> = opened.members.iter().map(|m| m.id).collect();
    assert!(!opened.released);
    assert_eq!(states(&db, &[cb]).await, [Pending]);
    assert_eq!(db.job(ids[0]).await.workflow_id, Some(batch), "members belong to the batch");
    finish(&db, "m0", ids[0], Completed, None).await;
    finish(&db, "m1", ids[1], Discarded, None).await;
    db.driver.job_cancel_many(JobCancelManyParams { ids: &ids[2..] }).await.expect("cancel");
    settle(&db, None).await;
    assert_eq!(states(&db, &[cb]).await, [Pending], "every member finished, but not sealed");

    let mut keyed = member("m3");
    keyed.unique = Some((vec![7; 32], JobState::DEFAULT_UNIQUE.to_vec()));
    let later = change(&db, BatchTarget::Existing(batch), vec![keyed.clone(), member("m4")], false).await;
    let again = change(&db, BatchTarget::Existing(batch), vec![keyed], false).await;
    assert!(again.members[0].existing && again.members[0].id == later.members[0].id);
    let sealed = change(&db, BatchTarget::Existing(batch), vec![], true).await;
    assert!(!sealed.released, "two members are still running");
    let before = db.all_jobs().await.len();
    let refused = try_change(&db, BatchTarget::Existing(batch), vec![member("m5")], false).await;
    assert!(
        matches!(refused, Err(DriverError::Workflow(WorkflowError::BatchSealed(id))) if id == batch),
        "{refused:?}"
    );
    assert_eq!(db.all_jobs().await.len(), before, "a refused add writes nothing");

    finish(&db, "m3", later.members[0].id, Completed, None).await;
    assert_eq!(states(&db, &[cb]).await, [Pending]);
    finish(&db, "m4", later.members[1].id, Completed, None).await;
    assert_eq!(states(&db, &[cb]).await, [Available], "the last finish released it");
    assert_eq!(settle(&db, None).await.released, 0, "nothing releases it twice");
    assert!(!change(&db, BatchTarget::Existing(batch), vec![], true).await.released, "sealed twice");
    assert_eq!(counts(&db, cb).await, (3, 1, 1));

    for target in [BatchTarget::Existing(batch + 1_000), {
        let flow = insert(&db, &workflow(OnFailure::Cancel, vec![step("w", &[])])).await;
        BatchTarget::Existing(db.job(flow[0]).await.workflow_id.unwrap_or_default())
    }] {
        let refused = try_change(&db, target.clone(), vec![], true).await;
        assert!(
            matches!(refused, Err(DriverError::Workflow(WorkflowError::UnknownBatch(_)))),
            "{target:?}: {refused:?}"
        );
    }
    let mut unique = callback.clone();
    unique.unique = Some((vec![1; 32], JobState::DEFAULT_UNIQUE.to_vec()));
    let refused =
        try_change(&db, BatchTarget::New { name: "u".into(), callback: Box::new(unique) }, vec![], false)
            .await;
    assert!(matches!(refused, Err(DriverError::Workflow(WorkflowError::UniqueCallback))), "{refused:?}");

    let empty = change(
        &db,
        BatchTarget::New { name: "empty".into(), callback: Box::new(callback.clone()) },
        vec![],
        true,
    )
    .await;
    assert!(empty.released);
    assert_eq!(states(&db, &[empty.callback_id]).await, [Available]);

    let mut tx = db.app_transaction().await;
    let change = BatchChange {
        target: BatchTarget::New { name: "rolled back".into(), callback: Box::new(callback) },
        members: vec![member("rb")],
        seal: true,
    };
    let gone = tx.change_batch(&change).await.expect("open in the transaction");
    tx.rollback().await.expect("roll back");
    assert!(
        db.driver
            .job_get(jobs_core::driver::JobGetParams { id: gone.callback_id })
            .await
            .expect("get")
            .is_none()
    );
}
