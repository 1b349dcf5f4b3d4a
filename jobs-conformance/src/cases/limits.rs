//! A queue's cluster-wide limits: a global limit on what runs, and a rate limit on what
//! starts, obeyed by every node's claims together.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use jobs_core::driver::{
    JobClaimParams, JobCompleteManyParams, JobGetParams, JobState, QueueSetLimitsParams, QueueSettingsParams,
    RateLimit,
};
use jobs_core::{ManualClock, QueueLimits, Worker, enqueue_many, set_queue_limits};

use crate::factory::{JobFactory, insert_all};
use crate::jobs::{Ledger, gated, nap, record};
use crate::{DEADLINE, TestDb, registry};
use jobs_core::testing::wait_for;

fn limited<'a>(limit: usize, node: &'a str, now: Option<DateTime<Utc>>) -> JobClaimParams<'a> {
    JobClaimParams {
        queue: "work",
        limit,
        node,
        now,
        recurring_size: false,
        limited: true,
        declared: Default::default(),
        ended: &[],
    }
}

fn limits(global_limit: Option<i32>, rate: Option<RateLimit>) -> QueueSetLimitsParams<'static> {
    QueueSetLimitsParams { queue: "work", global_limit, per_key_limit: None, rate, per_key_rate: None }
}

async fn available(db: &TestDb, n: usize) -> Vec<i64> {
    let ago = Utc::now() - chrono::Duration::seconds(10);
    insert_all(&*db.driver, (0..n).map(|_| JobFactory::new("k").state(JobState::Available, ago)).collect())
        .await
}

/// A global limit of 5: claims racing from two nodes take 5 jobs between them, then none
/// until one ends; a lowered limit takes nothing more; cleared, claims take everything.
pub async fn a_global_limit_caps_what_runs_across_nodes(db: TestDb) {
    available(&db, 30).await;
    db.driver.queue_set_limits(limits(Some(5), None)).await.expect("set");
    let stored = db.driver.queue_settings(QueueSettingsParams { queue: Some("work") }).await.expect("read");
    assert_eq!((stored[0].global_limit, stored[0].limited()), (Some(5), true));

    // Sixteen claims of 3 from two nodes, released at once, each on a connection of its own.
    let nodes: [Arc<dyn jobs_core::driver::Driver>; 2] = [(db.another)(8), (db.another)(8)];
    let start = Arc::new(tokio::sync::Barrier::new(16));
    let mut racing = Vec::new();
    for i in 0..16 {
        let (driver, start) = (nodes[i % 2].clone(), start.clone());
        racing.push(tokio::spawn(async move {
            let node = format!("node-{}", i % 2);
            start.wait().await;
            driver.job_claim(limited(3, &node, None)).await.expect("claim")
        }));
    }
    let mut claimed = Vec::new();
    for claim in racing {
        claimed.extend(claim.await.expect("task"));
    }
    assert_eq!(claimed.len(), 5, "sixteen racing claims take the limit between them");
    assert!(db.driver.job_claim(limited(10, "node-9", None)).await.expect("claim").is_empty());

    // One ends: room for one more.
    let done = crate::factory::succeeded(claimed[0].id, "work", 1);
    db.driver
        .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
        .await
        .expect("complete");
    assert_eq!(db.driver.job_claim(limited(10, "node-9", None)).await.expect("claim").len(), 1);

    // Lowered below what runs: nothing more starts.
    db.driver.queue_set_limits(limits(Some(2), None)).await.expect("lower");
    assert!(db.driver.job_claim(limited(10, "node-9", None)).await.expect("claim").is_empty());

    // Cleared: a claim still marked limited (the worker has not re-read) takes its size.
    db.driver.queue_set_limits(limits(None, None)).await.expect("clear");
    let stored = db.driver.queue_settings(QueueSettingsParams { queue: Some("work") }).await.expect("read");
    assert_eq!((stored[0].global_limit, stored[0].limited()), (None, false));
    assert_eq!(db.driver.job_claim(limited(10, "node-9", None)).await.expect("claim").len(), 10);
    assert_eq!(db.count(Some(JobState::Running)).await, 15);
}

/// 4 jobs a minute, counted in slices of 3 s: the minute's claims take 4; they count until
/// a whole minute after their slice ended, no longer.
pub async fn a_rate_limit_slides_over_its_window(db: TestDb) {
    available(&db, 40).await;
    db.driver
        .queue_set_limits(limits(None, Some(RateLimit { allowed: 4, period_secs: 60 })))
        .await
        .expect("set");
    let stored = db.driver.queue_settings(QueueSettingsParams { queue: Some("work") }).await.expect("read");
    assert_eq!(stored[0].rate(), Some(RateLimit { allowed: 4, period_secs: 60 }));
    // Claims at chosen times: a minute boundary an hour from now.
    let t0 =
        Utc::now().duration_trunc(chrono::Duration::minutes(1)).expect("minute") + chrono::Duration::hours(1);
    let at = |s: i64| Some(t0 + chrono::Duration::seconds(s));
    let mut taken = Vec::new();
    for (second, wanted) in [(0, 10), (30, 10), (60, 10), (63, 1), (63, 10), (123, 10), (126, 10)] {
        taken.push(db.driver.job_claim(limited(wanted, "node-a", at(second))).await.expect("claim").len());
    }
    // 0: 4 of 10. 30 and 60: the 4 still count. 63: a minute after their slice, 1, then
    // 3 more. 123: those 4 count. 126: nothing started in the last minute and a slice.
    assert_eq!(taken, [4, 0, 0, 1, 3, 0, 4]);

    // A limit on what runs and one on what starts: the smaller wins.
    db.driver
        .queue_set_limits(limits(Some(20), Some(RateLimit { allowed: 100, period_secs: 1 })))
        .await
        .expect("both");
    let running = db.count(Some(JobState::Running)).await;
    assert_eq!(running, 12);
    assert_eq!(db.driver.job_claim(limited(40, "node-a", at(400))).await.expect("claim").len(), 8);
}

/// Two workers of 10 slots on a queue limited to 2 at once: never more than 2 of its jobs
/// run at a time, and all of them run. Then a rate of 3 an hour: 3 run, the others wait
/// for the clock to move on an hour.
pub async fn workers_obey_the_queues_limits(db: TestDb) {
    let ledger = Ledger::new();
    db.driver.queue_set_limits(limits(Some(2), None)).await.expect("set");
    enqueue_many(&db.driver, (0..12).map(|n| nap::build(ledger.nap(n, 60)))).await.expect("enqueue");
    let mut handles = Vec::new();
    for i in 0..2 {
        let worker = Worker::builder((db.another)(4))
            .queue("work", 10)
            .node_name(format!("node-{i}"))
            .registry(registry())
            .poll_interval(Duration::from_millis(100))
            .build()
            .expect("build");
        handles.push(worker.start().await.expect("start"));
    }
    wait_for("the 12 naps to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 12).then_some(())
    })
    .await;
    for handle in handles {
        handle.shutdown().await.expect("shutdown");
    }
    assert_eq!(ledger.runs().len(), 12);
    // Never more than two at once (without the limit: all twelve). Two at once is the
    // expected peak, but a loaded machine may start a claim's second job late.
    let most = ledger.most_at_once();
    assert!((1..=2).contains(&most), "{most} at once under a global limit of 2");

    // A rate: the worker's clock starts now and moves on an hour when told.
    let ledger = Ledger::new();
    let rate = QueueLimits { rate: Some(RateLimit { allowed: 3, period_secs: 3600 }), ..Default::default() };
    set_queue_limits(&db.driver, "work", rate).await.expect("rate");
    let too_fast = QueueLimits { rate: Some(RateLimit { allowed: 3, period_secs: 0 }), ..Default::default() };
    assert!(set_queue_limits(&db.driver, "work", too_fast).await.is_err(), "a zero period is refused");
    enqueue_many(&db.driver, (0..6).map(|n| record::build(ledger.record(n)))).await.expect("enqueue");
    let clock = ManualClock::new(Utc::now() + chrono::Duration::seconds(1));
    let worker = db.worker().clock(Arc::new(clock.clone())).build().expect("build");
    let handle = worker.start().await.expect("start");
    wait_for("3 jobs to run", DEADLINE, || async { (ledger.runs().len() == 3).then_some(()) }).await;
    // The worker's first claim asked for 10 and was given 3: the others were never claimed.
    wait_for("3 jobs to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 15).then_some(())
    })
    .await;
    assert_eq!(db.count(Some(JobState::Available)).await, 3);
    assert!(db.all_jobs().await.iter().filter(|j| j.state == JobState::Available).all(|j| j.attempt == 0));
    clock.advance(Duration::from_secs(2 * 3600));
    wait_for("the other 3 to run an hour later", DEADLINE, || async {
        (ledger.runs().len() == 6).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
}

/// A job's end frees its room under a limit at once, not when its outcome is written: under
/// a global limit of 1, while the first job's outcome waits to be written (its row locked
/// by an application's transaction), the worker starts the second. (Needs row locks: where
/// one writer at a time holds the file, the transaction would hold up the claim too.)
pub async fn a_jobs_end_frees_its_room_before_its_outcome_is_written(db: TestDb) {
    let ledger = Ledger::new();
    db.driver.queue_set_limits(limits(Some(1), None)).await.expect("set");
    let first = enqueue_many(&db.driver, [gated::build(ledger.gated(1))]).await.expect("enqueue");
    enqueue_many(&db.driver, [record::build(ledger.record(2))]).await.expect("enqueue");
    let handle = db.worker().build().expect("build").start().await.expect("start");
    wait_for("the first job to start", DEADLINE, || async { (ledger.runs().len() == 1).then_some(()) }).await;

    let mut tx = db.app_transaction().await;
    let lock = format!("UPDATE jobs SET priority = priority WHERE id = {}", first[0].id);
    tx.execute(&lock).await.expect("the application locks the first job's row");
    ledger.open_gate(1);
    wait_for("the second job to start while the first one's outcome waits", DEADLINE, || async {
        (ledger.runs().len() == 2).then_some(())
    })
    .await;
    let row = db.driver.job_get(JobGetParams { id: first[0].id }).await.expect("get").expect("row");
    assert_eq!(row.state, JobState::Running, "the first job's outcome is not written yet");

    tx.rollback().await.expect("roll back");
    wait_for("both to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 2).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
}

/// Limits set one after another read back as last set, whatever was there before: a
/// limit given replaces the stored one, one not given is removed, the concurrency stays.
/// (MariaDB's `JSON_MERGE_PATCH` kept the old global limit when the same patch removed the
/// per-key one stored before it, first in the document.)
pub async fn limits_set_again_read_back_as_set(db: TestDb) {
    let rate = RateLimit { allowed: 5, period_secs: 60 };
    let per_key_rate = RateLimit { allowed: 2, period_secs: 3600 };
    let set = |global_limit, per_key_limit, rate, per_key_rate| QueueSetLimitsParams {
        queue: "work",
        global_limit,
        per_key_limit,
        rate,
        per_key_rate,
    };
    let read = || async {
        let all = db.driver.queue_settings(QueueSettingsParams { queue: Some("work") }).await.expect("read");
        let s = all.first().cloned().expect("a row");
        (s.concurrency, s.global_limit, s.per_key_limit, s.rate(), s.per_key_rate())
    };
    let steps = [
        (None, Some(1), None, Some(per_key_rate)),
        (Some(1), Some(1), Some(rate), None),
        (Some(2), None, None, Some(per_key_rate)),
        (None, Some(4), Some(rate), Some(per_key_rate)),
        (Some(7), Some(2), None, None),
        (None, None, None, Some(per_key_rate)),
        (None, None, None, None),
    ];
    for (global, per_key, rate, key_rate) in steps {
        db.driver.queue_set_limits(set(global, per_key, rate, key_rate)).await.expect("set");
        let expected = (None, global.map(i64::from), per_key.map(i64::from), rate, key_rate);
        assert_eq!(read().await, expected, "after setting {global:?}, {per_key:?}, {rate:?}, {key_rate:?}");
    }
    db.driver
        .queue_set_concurrency(jobs_core::driver::QueueSetConcurrencyParams {
            queue: "work",
            concurrency: Some(3),
        })
        .await
        .expect("concurrency");
    db.driver.queue_set_limits(set(Some(2), Some(1), None, Some(per_key_rate))).await.expect("set");
    db.driver.queue_set_limits(set(None, None, Some(rate), None)).await.expect("set");
    assert_eq!(read().await, (Some(3), None, None, Some(rate), None), "the concurrency stays");
}
