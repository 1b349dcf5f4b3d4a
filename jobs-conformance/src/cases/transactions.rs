//! The application's own transaction: a job enqueued in it exists when it commits and never
//! existed when it rolls back, savepoints included, on async and sync connections; a cancel
//! or a pause, a retry or a delete in it holds only if it commits; while it is open, it
//! holds only the jobs it acts on.

use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{
    DependsOn, JobCancelManyParams, JobCompleteManyParams, JobGetParams, JobState, Needs, NewJob, NewStep,
    NewWorkflow, OnFailure, QueueIsPausedParams,
};

use super::workflows::{self, claim, insert, workflow};
use crate::TestDb;
use crate::factory::{JobFactory, insert_all, succeeded};
use crate::jobs::{Ledger, record};

/// The `record` job writing `n` to `ledger`.
fn job(ledger: &Ledger, n: i64) -> NewJob {
    record::build(ledger.record(n)).to_new_job().expect("a valid job")
}

/// Runs every job of the database and checks that exactly `ns` ran, each once.
async fn only_these_exist_and_run(db: &TestDb, ledger: &Ledger, ns: &[i64]) {
    assert_eq!(db.count(None).await, ns.len() as i64, "the committed jobs, and nothing rolled back");
    let handle = db.worker().without_maintenance().build().expect("build").start().await.expect("start");
    for row in db.all_jobs().await {
        db.wait_state(row.id, JobState::Completed).await;
    }
    handle.shutdown().await.expect("shutdown");
    let mut ran: Vec<i64> = ledger.runs().iter().map(|r| r.n).collect();
    ran.sort_unstable();
    assert_eq!(ran, ns, "each committed job ran once; no rolled-back one ran");
}

/// On the application's async connection: committed, the job exists and runs; rolled
/// back, it never existed; in a savepoint rolled back inside a committed transaction, it
/// never existed, and in one released, it exists (unless the whole transaction rolls back).
pub async fn a_job_enqueued_in_the_applications_transaction_commits_and_rolls_back_with_it(db: TestDb) {
    let ledger = Ledger::new();
    let mut tx = db.app_transaction().await;
    tx.insert(&[job(&ledger, 1)]).await.expect("enqueue");
    tx.commit().await.expect("commit");

    let mut tx = db.app_transaction().await;
    tx.insert(&[job(&ledger, 2)]).await.expect("enqueue");
    tx.rollback().await.expect("rollback");

    let mut tx = db.app_transaction().await;
    tx.insert(&[job(&ledger, 3)]).await.expect("enqueue");
    tx.savepoint().await.expect("savepoint");
    tx.insert(&[job(&ledger, 4)]).await.expect("enqueue in the savepoint");
    tx.rollback_to_savepoint().await.expect("roll back to the savepoint");
    tx.savepoint().await.expect("another savepoint");
    tx.insert(&[job(&ledger, 5), job(&ledger, 6)]).await.expect("enqueue in the savepoint");
    tx.release_savepoint().await.expect("release the savepoint");
    tx.commit().await.expect("commit");

    let mut tx = db.app_transaction().await;
    tx.savepoint().await.expect("savepoint");
    tx.insert(&[job(&ledger, 7)]).await.expect("enqueue in the savepoint");
    tx.release_savepoint().await.expect("release the savepoint");
    tx.rollback().await.expect("roll back what the savepoint released into");

    only_these_exist_and_run(&db, &ledger, &[1, 3, 5, 6]).await;
}

/// The same on the application's synchronous connection (`enqueue_sync`'s path).
pub async fn a_job_enqueued_on_a_synchronous_connection_commits_and_rolls_back_with_it(db: TestDb) {
    let ledger = Ledger::new();
    let mut tx = db.sync_app_transaction();
    tx.insert(&[job(&ledger, 1)]).expect("enqueue");
    tx.commit().expect("commit");

    let mut tx = db.sync_app_transaction();
    tx.insert(&[job(&ledger, 2)]).expect("enqueue");
    tx.rollback().expect("rollback");

    let mut tx = db.sync_app_transaction();
    tx.insert(&[job(&ledger, 3)]).expect("enqueue");
    tx.savepoint().expect("savepoint");
    tx.insert(&[job(&ledger, 4)]).expect("enqueue in the savepoint");
    tx.rollback_to_savepoint().expect("roll back to the savepoint");
    tx.savepoint().expect("another savepoint");
    tx.insert(&[job(&ledger, 5), job(&ledger, 6)]).expect("enqueue in the savepoint");
    tx.release_savepoint().expect("release the savepoint");
    tx.commit().expect("commit");

    let mut tx = db.sync_app_transaction();
    tx.savepoint().expect("savepoint");
    tx.insert(&[job(&ledger, 7)]).expect("enqueue in the savepoint");
    tx.release_savepoint().expect("release the savepoint");
    tx.rollback().expect("roll back what the savepoint released into");

    only_these_exist_and_run(&db, &ledger, &[1, 3, 5, 6]).await;
}

/// A cancel and a pause in the application's transaction: rolled back, the job is still
/// available and the queue not paused; committed, the job is cancelled and the queue
/// paused.
pub async fn a_cancel_or_pause_in_the_applications_transaction_holds_only_if_it_commits(db: TestDb) {
    let ledger = Ledger::new();
    let id = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    let paused =
        async || db.driver.queue_is_paused(QueueIsPausedParams { queue: "work" }).await.expect("read");

    let mut tx = db.app_transaction().await;
    assert_eq!(tx.cancel(&[id]).await.expect("cancel"), [JobState::Cancelled]);
    tx.set_paused("work", true).await.expect("pause");
    tx.rollback().await.expect("rollback");
    assert_eq!(db.job(id).await.state, JobState::Available, "a rolled-back cancel left the job as it was");
    assert!(!paused().await, "a rolled-back pause left the queue running");

    let mut tx = db.app_transaction().await;
    assert_eq!(tx.cancel(&[id]).await.expect("cancel"), [JobState::Cancelled]);
    tx.set_paused("work", true).await.expect("pause");
    tx.commit().await.expect("commit");
    assert_eq!(db.job(id).await.state, JobState::Cancelled);
    assert!(paused().await, "a committed pause holds");
}

/// A retry and a delete in the application's transaction, and a read in it: the read sees
/// the transaction's own change; rolled back, nothing changed; committed, the job is
/// available again, then gone.
pub async fn a_retry_or_delete_in_the_applications_transaction_holds_only_if_it_commits(db: TestDb) {
    let ledger = Ledger::new();
    let id = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[id] }).await.expect("cancel");

    let mut tx = db.app_transaction().await;
    assert_eq!(tx.retry(&[id]).await.expect("retry").retried, 1);
    let seen = tx.get(id).await.expect("read").expect("the job");
    assert_eq!(seen.state, JobState::Available, "the transaction reads its own retry");
    tx.rollback().await.expect("rollback");
    assert_eq!(db.job(id).await.state, JobState::Cancelled, "a rolled-back retry left the job as it was");

    let mut tx = db.app_transaction().await;
    assert_eq!(tx.retry(&[id]).await.expect("retry").retried, 1);
    tx.commit().await.expect("commit");
    assert_eq!(db.job(id).await.state, JobState::Available, "a committed retry holds");

    let mut tx = db.app_transaction().await;
    assert_eq!(tx.delete(&[id]).await.expect("delete"), 1);
    assert!(tx.get(id).await.expect("read").is_none(), "the transaction reads its own delete");
    tx.rollback().await.expect("rollback");
    assert_eq!(db.job(id).await.state, JobState::Available, "a rolled-back delete left the job");

    let mut tx = db.app_transaction().await;
    assert_eq!(tx.delete(&[id]).await.expect("delete"), 1);
    tx.commit().await.expect("commit");
    assert!(
        db.driver.job_get(JobGetParams { id }).await.expect("read").is_none(),
        "a committed delete holds"
    );
}

/// An application's transaction that cancels, retries and deletes jobs (a workflow's
/// step among them) and adds a workflow step after a finished job holds those jobs only,
/// on a table as small as a new application's: while it is open, the driver completes a
/// running job, claims an available one and inserts a new workflow at once. (On a small table a planner may read the whole table; a
/// locking read or update under InnoDB's `REPEATABLE READ` then locks every row it
/// read, until the transaction ends. Needs row locks: where one writer at a time holds
/// the file, the transaction holds it all.)
pub async fn an_applications_transaction_holds_only_the_jobs_it_acts_on(db: TestDb) {
    let at = Utc::now();
    let ids = insert_all(
        &*db.driver,
        vec![
            JobFactory::new("k").queue("held"),
            JobFactory::new("k").queue("held").state(JobState::Discarded, at),
            JobFactory::new("k").queue("held").state(JobState::Completed, at),
            JobFactory::new("k").queue("busy").state(JobState::Running, at),
            JobFactory::new("k").queue("free"),
        ],
    )
    .await;
    let (cancelled, retried, done, running, free) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
    // The job deleted is the last step of a workflow (the newest: its index entry is
    // next to where the next workflow's go).
    let deleted = insert(&db, &workflow(OnFailure::Cancel, vec![workflows::step("held", &[])])).await[0];

    let mut tx = db.app_transaction().await;
    tx.cancel(&[cancelled]).await.expect("cancel in the transaction");
    assert_eq!(tx.retry(&[retried]).await.expect("retry in the transaction").retried, 1);
    assert_eq!(tx.delete(&[deleted]).await.expect("delete in the transaction"), 1);
    let step = NewStep {
        job: NewJob::new("step", "held", "{}"),
        after: vec![DependsOn::Job(done)],
        needs: Needs::Completed,
    };
    let flow = NewWorkflow { name: "after".into(), on_failure: OnFailure::Cancel, steps: vec![step] };
    let added = tx.insert_workflow(&flow).await.expect("a workflow in the transaction").jobs[0].id;

    // A deadline far beyond either statement's time (a driver with a lock wait fails at
    // its end, 5 s on MariaDB and MySQL; one without would wait until the deadline).
    let others = async {
        let done = succeeded(running, "busy", 1);
        let applied = db
            .driver
            .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
            .await
            .expect("complete a job the transaction does not touch");
        assert_eq!(applied, vec![running]);
        claim(&db, "free", free).await;
        insert(&db, &workflow(OnFailure::Cancel, vec![workflows::step("later", &[])])).await;
    };
    tokio::time::timeout(Duration::from_secs(20), others)
        .await
        .expect("the driver waited for rows the application's transaction never named");
    tx.commit().await.expect("commit");

    assert_eq!(db.job(cancelled).await.state, JobState::Cancelled);
    assert_eq!(db.job(retried).await.state, JobState::Available);
    assert!(db.driver.job_get(JobGetParams { id: deleted }).await.expect("read").is_none());
    assert_eq!(db.job(added).await.state, JobState::Available, "its dependency had completed");
    assert_eq!(db.job(running).await.state, JobState::Completed);
}
