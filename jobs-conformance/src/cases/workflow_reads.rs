//! Reading a workflow's members: the list and the count of the jobs of one workflow
//! (`JobFilter::workflow`), finished ones included wherever they are kept, with the other
//! conditions of a filter — what the dashboard's workflow view and its whole-workflow
//! cancel and retry read; a workflow's own row, read by id, pruned with its last member.

use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{
    BatchChange, BatchTarget, DependsOn, JobArchiveParams, JobBatchParams, JobCancelManyParams,
    JobCountParams, JobDeleteManyParams, JobFilter, JobListParams, JobOrder, JobPruneParams, JobState,
    NewJob, OnFailure, WorkflowGetParams, WorkflowInfo, WorkflowPruneParams,
};
use jobs_core::{Count, JobRow};

use super::workflows::{finish, insert, step, workflow};
use crate::TestDb;
use crate::factory::{JobFactory, insert_all};

async fn listed(db: &TestDb, filter: &JobFilter) -> Vec<i64> {
    let params = JobListParams { filter, before: None, limit: 100 };
    let rows: Vec<JobRow> = db.driver.job_list(params).await.expect("list");
    rows.into_iter().map(|r| r.id).collect()
}

async fn counted(db: &TestDb, filter: &JobFilter) -> Count {
    db.driver.job_count(JobCountParams { filter, cap: 1_000 }).await.expect("count")
}

/// Two workflows and a job in none: a workflow's filter lists and counts its members
/// only, its finished step too, and narrows with states like any filter.
pub async fn a_workflows_members_are_listed_and_counted_by_its_id(db: TestDb) {
    let steps = |name: &str| {
        vec![
            step(&format!("{name}-0"), &[]),
            step(&format!("{name}-1"), &[DependsOn::Step(0)]),
            step(&format!("{name}-2"), &[DependsOn::Step(1)]),
        ]
    };
    let mine = insert(&db, &workflow(OnFailure::Cancel, steps("mine"))).await;
    let other = insert(&db, &workflow(OnFailure::Cancel, steps("other"))).await;
    insert_all(&*db.driver, vec![JobFactory::new("k").queue("no-workflow")]).await;
    finish(&db, "mine-0", mine[0], JobState::Completed, None).await;
    let workflow_id = db.job(mine[0]).await.workflow_id.expect("a step names its workflow");

    let members =
        JobFilter { workflow: Some(workflow_id), order: JobOrder::OldestFirst, ..JobFilter::default() };
    assert_eq!(listed(&db, &members).await, mine, "its members, the finished one too, and nothing else");
    assert_eq!(counted(&db, &members).await, Count::Exact(3));
    let finished = JobFilter { states: JobState::FINAL.to_vec(), ..members.clone() };
    assert_eq!(listed(&db, &finished).await, mine[..1]);
    assert_eq!(counted(&db, &finished).await, Count::Exact(1));
    let waiting = JobFilter { states: vec![JobState::Pending], ..members.clone() };
    assert_eq!(listed(&db, &waiting).await, mine[2..]);
    let theirs = db.job(other[0]).await.workflow_id;
    let others = JobFilter { workflow: theirs, order: JobOrder::OldestFirst, ..JobFilter::default() };
    assert_eq!(listed(&db, &others).await, other);
}

async fn get(db: &TestDb, id: i64) -> Option<WorkflowInfo> {
    db.driver.workflow_get(WorkflowGetParams { id }).await.expect("read the workflow")
}

/// The pruner's sweep of workflows' rows, in pages of two, to its end: how many went.
async fn sweep(db: &TestDb) -> usize {
    let (mut after, mut deleted) = (0, 0);
    loop {
        let page = db.driver.workflow_prune(WorkflowPruneParams { after, limit: 2 }).await.expect("sweep");
        deleted += page.deleted;
        match page.next {
            Some(next) => after = next,
            None => return deleted,
        }
    }
}

/// A workflow's row reads by id (its name, what a failure does; a batch's callback and
/// seal), and goes with its last member, not before: pruned one member at a time (then
/// the pruner's sweep of workflows), from the jobs table and the archive where there is
/// one; deleted by a person through the driver (at once) or in an application's
/// transaction (then the sweep). A batch not sealed stays (an add may be committing).
pub async fn a_workflow_reads_by_id_and_goes_with_its_last_member(db: TestDb) {
    let steps = vec![step("pruned-0", &[]), step("pruned-1", &[DependsOn::Step(0)])];
    let ids = insert(&db, &workflow(OnFailure::Hold, steps)).await;
    let id = db.job(ids[0]).await.workflow_id.expect("a step names its workflow");
    let expected = WorkflowInfo {
        id,
        name: "flow".into(),
        on_failure: OnFailure::Hold,
        callback_id: None,
        sealed: false,
    };
    assert_eq!(get(&db, id).await, Some(expected));
    assert_eq!(get(&db, id + 1_000).await, None, "no such workflow");
    let callback = NewJob::new("callback", "pruned-callback", "{}");
    let change = BatchChange {
        target: BatchTarget::New { name: "newsletter".into(), callback: Box::new(callback) },
        members: vec![NewJob::new("member", "pruned-member", "{}")],
        seal: true,
    };
    let batch = db.driver.job_batch(JobBatchParams { change: &change, now: None }).await.expect("open");
    let read = get(&db, batch.batch_id).await.expect("the batch");
    assert_eq!(
        (read.name.as_str(), read.callback_id, read.sealed),
        ("newsletter", Some(batch.callback_id), true)
    );

    for (step, queue) in ids.iter().zip(["pruned-0", "pruned-1"]) {
        finish(&db, queue, *step, JobState::Completed, None).await;
    }
    db.driver
        .job_archive(JobArchiveParams { limit: 1 })
        .await
        .expect("archive one (where there is an archive)");
    // The first member (finished first: in the archive where there is one) keeps the row
    // through the sweep when the other goes.
    let mut tx = db.app_transaction().await;
    assert_eq!(tx.delete(&ids[1..]).await.expect("delete in the transaction"), 1);
    tx.commit().await.expect("commit");
    sweep(&db).await;
    assert!(get(&db, id).await.is_some(), "a member is left");
    let members = JobFilter { workflow: Some(id), ..JobFilter::default() };
    let later = Some(Utc::now() + chrono::Duration::hours(1));
    let prune =
        JobPruneParams { state: JobState::Completed, retention: Duration::ZERO, limit: 1, now: later };
    loop {
        let left = counted(&db, &members).await;
        assert_eq!(get(&db, id).await.is_some(), left != Count::Exact(0), "{left:?} members left");
        if left == Count::Exact(0) {
            break;
        }
        assert!(db.driver.job_prune(prune).await.expect("prune") > 0, "a member is pruned");
        sweep(&db).await;
    }
    assert!(get(&db, batch.batch_id).await.is_some(), "a batch with members left stays");

    // A batch not sealed may still take members: it stays when its last one goes.
    let callback = NewJob::new("callback", "open-callback", "{}");
    let change = BatchChange {
        target: BatchTarget::New { name: "open".into(), callback: Box::new(callback) },
        members: Vec::new(),
        seal: false,
    };
    let open = db.driver.job_batch(JobBatchParams { change: &change, now: None }).await.expect("open");
    let ids = [open.callback_id];
    db.driver.job_cancel_many(JobCancelManyParams { ids: &ids }).await.expect("cancel the callback");
    let prune = JobPruneParams { state: JobState::Cancelled, ..prune };
    assert_eq!(db.driver.job_prune(prune).await.expect("prune"), 1, "the callback goes");
    sweep(&db).await;
    assert!(get(&db, open.batch_id).await.is_some(), "an unsealed batch stays");

    // A person's delete: a workflow goes with the last of its members, not before.
    let steps = vec![step("deleted-0", &[]), step("deleted-1", &[DependsOn::Step(0)])];
    let ids = insert(&db, &workflow(OnFailure::Cancel, steps)).await;
    let id = db.job(ids[0]).await.workflow_id.expect("a step names its workflow");
    let delete = |ids: Vec<i64>| {
        let driver = db.driver.clone();
        async move { driver.job_delete_many(JobDeleteManyParams { ids: &ids }).await.expect("delete") }
    };
    assert_eq!(delete(vec![ids[1]]).await, 1);
    assert!(get(&db, id).await.is_some(), "a member is left");
    assert_eq!(delete(vec![ids[0]]).await, 1);
    assert_eq!(get(&db, id).await, None, "gone with its last member");

    // An application's delete leaves the row to the sweep, which takes it and nothing
    // else: the batch still open, and a workflow with a member left, stay.
    let steps = vec![step("app-0", &[]), step("app-1", &[DependsOn::Step(0)])];
    let ids = insert(&db, &workflow(OnFailure::Cancel, steps)).await;
    let id = db.job(ids[0]).await.workflow_id.expect("a step names its workflow");
    let kept = insert(&db, &workflow(OnFailure::Cancel, vec![step("app-kept", &[])])).await;
    let kept = db.job(kept[0]).await.workflow_id.expect("a step names its workflow");
    let mut tx = db.app_transaction().await;
    assert_eq!(tx.delete(&ids).await.expect("delete in the transaction"), 2);
    tx.commit().await.expect("commit");
    assert_eq!(sweep(&db).await, 1, "the emptied workflow goes");
    assert_eq!(get(&db, id).await, None);
    assert!(get(&db, kept).await.is_some(), "a workflow with a member stays");
    assert!(get(&db, open.batch_id).await.is_some(), "an unsealed batch stays");
}
