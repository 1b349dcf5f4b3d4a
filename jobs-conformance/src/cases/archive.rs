//! Finished jobs wherever the backend keeps them: on a backend with an archive
//! (`Capability::Archive`, Postgres), a success moves there in its completion statement and
//! the archiver moves every other finished job; elsewhere they stay in the jobs table.
//! Either way every read, action, uniqueness rule and the pruner treat them the same.

use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{
    Capability, JobCancelManyParams, JobDeleteManyParams, JobFilter, JobGetParams, JobListParams, JobOrder,
    JobRetryManyParams, JobRow, JobState,
};
use jobs_core::maintenance::{Archiver, ArchiverConfig, Pruner, PrunerConfig, ServiceContext};

use crate::jobs::{Behaviour, Ledger, Report, behave, daily_report, record};
use crate::{DEADLINE, TestDb};
use jobs_core::testing::wait_for;

async fn list(db: &TestDb, filter: &JobFilter) -> Vec<JobRow> {
    db.driver.job_list(JobListParams { filter, before: None, limit: 100 }).await.expect("list")
}

/// Runs the archiver once, as the leader does every second; returns how many moved.
async fn archive(db: &TestDb) -> i64 {
    let ctx = ServiceContext::new(db.driver.clone(), "archiver");
    Archiver::new(ArchiverConfig { batch: 2, ..ArchiverConfig::default() })
        .run_once(&ctx)
        .await
        .expect("archive")
}

/// A success, a discard, a cancel by the handler and a cancel of a waiting job: read the
/// same before and after the archiver ran; listed, counted and windowed together with the
/// waiting jobs; retried (back to work, and run again), deleted and pruned from where they
/// are.
pub async fn finished_jobs_behave_the_same_wherever_they_are_kept(db: TestDb) {
    let archives = db.driver.capabilities().has(Capability::Archive);
    let started = Utc::now() - chrono::Duration::seconds(1);
    let handle = db.worker().without_maintenance().build().expect("build").start().await.expect("start");
    let ledger = Ledger::new();
    let succeeded = behave::enqueue(&db.driver, Behaviour::Succeed).await.expect("enqueue").id;
    let discarded = behave::enqueue(&db.driver, Behaviour::Discard).await.expect("enqueue").id;
    let gave_up = behave::enqueue(&db.driver, Behaviour::Cancel).await.expect("enqueue").id;
    let later = record::build(ledger.record(1))
        .run_in(Duration::from_secs(3600))
        .enqueue(&db.driver)
        .await
        .expect("enqueue")
        .id;
    let waiting = record::build(ledger.record(2))
        .run_in(Duration::from_secs(3600))
        .enqueue(&db.driver)
        .await
        .expect("enqueue")
        .id;
    // An id given twice is cancelled, and reported, once.
    let states =
        db.driver.job_cancel_many(JobCancelManyParams { ids: &[later, later] }).await.expect("cancel");
    assert_eq!(states, vec![JobState::Cancelled]);
    db.wait_state(succeeded, JobState::Completed).await;
    db.wait_state(discarded, JobState::Discarded).await;
    db.wait_state(gave_up, JobState::Cancelled).await;

    let finished = [succeeded, discarded, gave_up, later];
    let mut before = Vec::new();
    for id in finished {
        before.push(db.job(id).await);
    }
    assert_eq!(before[0].result, Some(serde_json::json!("done")));
    assert_eq!(before[1].errors[0]["message"], "bad address");

    // The success moved with its completion; the three others finished in place and move
    // now, two per batch. A second pass finds nothing.
    assert_eq!(archive(&db).await, if archives { 3 } else { 0 });
    assert_eq!(archive(&db).await, 0);
    let mut after = Vec::new();
    for id in finished {
        after.push(db.job(id).await);
    }
    assert_eq!(after, before, "every column kept");

    // Lists, counts and windows see both places.
    let every = JobFilter::default();
    let ids: Vec<i64> = list(&db, &every).await.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![waiting, later, gave_up, discarded, succeeded], "newest first");
    let ended = JobFilter {
        states: vec![JobState::Completed, JobState::Discarded, JobState::Cancelled],
        order: JobOrder::RecentlyFinished,
        ..JobFilter::default()
    };
    let mut by_finish: Vec<JobRow> = after.clone();
    by_finish.sort_by_key(|j| std::cmp::Reverse((j.finalized_at, j.id)));
    let listed: Vec<i64> = list(&db, &ended).await.iter().map(|j| j.id).collect();
    assert_eq!(listed, by_finish.iter().map(|j| j.id).collect::<Vec<_>>(), "by finish time");
    let window = JobFilter {
        from: Some(started),
        to: Some(Utc::now() + chrono::Duration::minutes(1)),
        ..every.clone()
    };
    let windowed: Vec<i64> = list(&db, &window).await.iter().map(|j| j.id).collect();
    assert_eq!(windowed.len(), 5, "{windowed:?}");
    assert_eq!(db.count(Some(JobState::Cancelled)).await, 2);
    assert_eq!(db.count(Some(JobState::Scheduled)).await, 1);
    assert_eq!(db.count(None).await, 5);

    // Retried from where it was kept: back to work with an attempt more, and run again.
    let retried = db.driver.job_retry_many(JobRetryManyParams { ids: &[discarded, waiting] }).await;
    assert_eq!(retried.expect("retry").retried, 2);
    let again = wait_for("the retried job's second discard", DEADLINE, || async {
        let row = db.driver.job_get(JobGetParams { id: discarded }).await.ok()??;
        (row.state == JobState::Discarded && row.attempt == 2).then_some(row)
    })
    .await;
    assert_eq!(again.errors.as_array().map(Vec::len), Some(2));
    assert_eq!(db.wait_state(waiting, JobState::Completed).await.attempt, 1);
    assert_eq!(archive(&db).await, if archives { 1 } else { 0 }, "the second discard");

    // Deleted from where it is kept.
    let deleted = db.driver.job_delete_many(JobDeleteManyParams { ids: &[later, succeeded] }).await;
    assert_eq!(deleted.expect("delete"), 2);
    assert!(db.driver.job_get(JobGetParams { id: later }).await.expect("get").is_none());

    // And pruned: nothing finished is kept past a zero retention.
    let pruner = Pruner::new(PrunerConfig {
        completed: Some(Duration::ZERO),
        cancelled: Some(Duration::ZERO),
        discarded: Some(Duration::ZERO),
        ..PrunerConfig::default()
    });
    let ctx = ServiceContext::new(db.driver.clone(), "pruner");
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), 3);
    assert_eq!(db.count(None).await, 0);
    handle.shutdown().await.expect("shutdown");
}

/// A key held in a final state (`completed` among its unique states) keeps holding after
/// the job finished and the archiver ran: a duplicate returns the finished job, until
/// the pruner removes it. A key held only while pending is free once the job completed.
pub async fn a_key_held_in_a_final_state_holds_after_the_archiver_ran(db: TestDb) {
    let handle = db.worker().without_maintenance().build().expect("build").start().await.expect("start");
    let monday = || Report { day: "2026-11-23".into() };
    let first = daily_report::enqueue(&db.driver, monday()).await.expect("enqueue");
    assert!(!first.existing);
    db.wait_state(first.id, JobState::Completed).await;
    let ledger = Ledger::new();
    let once = record::build(ledger.record(1)).unique_key("once").enqueue(&db.driver).await.expect("enqueue");
    db.wait_state(once.id, JobState::Completed).await;
    archive(&db).await;
    archive(&db).await;

    let again = daily_report::enqueue(&db.driver, monday()).await.expect("again");
    assert_eq!((again.id, again.existing), (first.id, true), "the completed report holds its day");
    let free = record::build(ledger.record(2)).unique_key("once").enqueue(&db.driver).await.expect("again");
    assert!(!free.existing, "a pending-only key is free once its job completed");
    db.wait_state(free.id, JobState::Completed).await;
    assert_eq!(db.job(first.id).await.result, Some(serde_json::json!("report of 2026-11-23")));

    let pruner = Pruner::new(PrunerConfig { completed: Some(Duration::ZERO), ..PrunerConfig::default() });
    let ctx = ServiceContext::new(db.driver.clone(), "pruner");
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), 3);
    let fresh = daily_report::enqueue(&db.driver, monday()).await.expect("after pruning");
    assert!(!fresh.existing, "pruned, the key is free");
    db.wait_state(fresh.id, JobState::Completed).await;
    handle.shutdown().await.expect("shutdown");
}
