//! A worker's life: pause and resume, graceful shutdown, wake-ups, cancellation.

use std::time::{Duration, Instant};

use jobs_core::driver::{
    JobCancelManyParams, JobState, LeaderGetParams, NodeListParams, QueueSetPausedParams,
};
use jobs_core::enqueue_many;

use crate::jobs::{Ledger, record, wait_until_cancelled};
use crate::{DEADLINE, TestDb};
use jobs_core::testing::wait_for;

/// A paused queue is never claimed, while the worker's other queue runs; resumed, its job
/// runs.
pub async fn a_paused_queue_is_not_claimed_until_resumed(db: TestDb) {
    let ledger = Ledger::new();
    db.driver.queue_set_paused(QueueSetPausedParams { queue: "work", paused: true }).await.expect("pause");
    let handle = db
        .worker()
        .queue("other", 2)
        .allow_queues_without_jobs()
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let paused_id = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    let other_id =
        record::build(ledger.record(2)).queue("other").enqueue(&db.driver).await.expect("enqueue").id;
    db.wait_state(other_id, JobState::Completed).await;
    let polled = handle.fetch_count("other");
    wait_for("three more polls of the other queue", DEADLINE, || async {
        (handle.fetch_count("other") >= polled + 3).then_some(())
    })
    .await;
    assert_eq!(handle.fetch_count("work"), 0, "a paused queue is never claimed");
    let row = db.job(paused_id).await;
    assert_eq!((row.state, row.attempt), (JobState::Available, 0));

    db.driver.queue_set_paused(QueueSetPausedParams { queue: "work", paused: false }).await.expect("resume");
    db.wait_state(paused_id, JobState::Completed).await;
    assert!(handle.fetch_count("work") > 0);
    handle.shutdown().await.expect("shutdown");
}

/// At the deadline, running jobs are cancelled and handed back without using an attempt;
/// nothing is left running; the node row and the lease are gone.
pub async fn shutdown_finishes_what_it_can_and_hands_back_the_rest(db: TestDb) {
    let handle = db
        .worker()
        .shutdown_timeout(Duration::from_millis(300))
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let ids: Vec<i64> = enqueue_many(&db.driver, (0..3).map(|_| wait_until_cancelled::build(())))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    wait_for("three running jobs", DEADLINE, || async { (handle.running() == 3).then_some(()) }).await;
    let report = handle.shutdown().await.expect("shutdown");
    assert_eq!(report.handed_back, 3);
    assert_eq!(db.count(Some(JobState::Running)).await, 0);
    for id in ids {
        let row = db.job(id).await;
        assert_eq!(row.state, JobState::Retryable);
        assert_eq!(
            (row.attempt, row.max_attempts - row.attempt),
            (1, 20),
            "handing back does not use up an attempt (one more is allowed); its number is never run again"
        );
        assert_eq!(row.errors[0]["error_type"], "shutdown");
    }
    assert!(db.driver.node_list(NodeListParams {}).await.expect("nodes").is_empty());
    let leader = db.driver.leader_get(LeaderGetParams { name: "default", now: None }).await.expect("leader");
    assert_eq!(leader, None, "lease released");
}

/// A worker whose poll is an hour away runs a job at once: the insert's notification
/// wakes it.
pub async fn a_notification_wakes_an_idle_worker_before_its_poll(db: TestDb) {
    let ledger = Ledger::new();
    let handle = db
        .worker()
        .poll_interval(Duration::from_secs(3600))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    wait_for("the notifications to arrive", DEADLINE, || async { handle.is_listening().then_some(()) }).await;
    let mut latencies = Vec::new();
    for n in 0..5 {
        let started = Instant::now();
        let id = record::enqueue(&db.driver, ledger.record(n)).await.expect("enqueue").id;
        db.wait_state(id, JobState::Completed).await;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    println!("enqueue to completed with notifications: median {:?}", latencies[2]);
    assert!(latencies[2] < Duration::from_secs(2), "woken by the notification: {latencies:?}");
    handle.shutdown().await.expect("shutdown");
}

/// Without notifications (a driver without them, or a worker behind a pooler), a
/// cancellation reaches the running job at the node's next heartbeat.
pub async fn a_running_job_is_cancelled_without_notifications(db: TestDb) {
    let handle = db
        .worker()
        .listen(false)
        .heartbeat_interval(Duration::from_millis(100))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    assert!(!handle.is_listening());
    let id = wait_until_cancelled::enqueue(&db.driver, ()).await.expect("enqueue").id;
    db.wait_state(id, JobState::Running).await;
    // An id given twice is told, and reported, once.
    let told = db.driver.job_cancel_many(JobCancelManyParams { ids: &[id, id] }).await.expect("cancel");
    assert_eq!(told, vec![JobState::Running]);
    let row = db.wait_state(id, JobState::Cancelled).await;
    assert_eq!(row.errors[0]["error_type"], "cancelled");
    handle.shutdown().await.expect("shutdown");
}
