//! Claims: order, exactly-once across workers, batch sizes.

use std::collections::HashSet;
use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{JobClaimParams, JobState, NodeListParams};
use jobs_core::{Worker, enqueue_many};

use crate::factory::{JobFactory, insert_all};
use crate::jobs::{Ledger, record};
use crate::{TestDb, registry};
use jobs_core::testing::wait_for;

fn claim<'a>(queue: &'a str, limit: usize, node: &'a str) -> JobClaimParams<'a> {
    JobClaimParams {
        queue,
        limit,
        node,
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    }
}

/// Lower priority first, then the longest due, then the oldest; never a job that is not
/// due, or of another queue; the claimed rows are running under the claiming node.
pub async fn claims_follow_priority_then_due_time_then_age(db: TestDb) {
    let now = Utc::now();
    let ago = |s: i64| now - chrono::Duration::seconds(s);
    let ids = insert_all(
        &*db.driver,
        vec![
            JobFactory::new("k").priority(1).state(JobState::Available, ago(100)),
            JobFactory::new("k").state(JobState::Available, ago(5)),
            JobFactory::new("k").state(JobState::Available, ago(20)),
            JobFactory::new("k").state(JobState::Available, ago(20)),
            JobFactory::new("k").priority(-3).state(JobState::Available, ago(1)),
            JobFactory::new("k").state(JobState::Scheduled, now + chrono::Duration::hours(1)),
            JobFactory::new("k").queue("other").priority(-9).state(JobState::Available, ago(500)),
        ],
    )
    .await;
    let mut order = Vec::new();
    for _ in 0..6 {
        order.extend(
            db.driver.job_claim(claim("work", 1, "node-a")).await.expect("claim").into_iter().map(|j| j.id),
        );
    }
    assert_eq!(
        order,
        vec![ids[4], ids[2], ids[3], ids[1], ids[0]],
        "the scheduled job and the other queue's stay"
    );
    let row = db.job(ids[4]).await;
    assert_eq!(
        (row.state, row.attempt, row.attempted_by.clone()),
        (JobState::Running, 1, vec!["node-a".to_owned()])
    );
    assert!(row.attempted_at.is_some());
    assert_eq!(db.job(ids[5]).await.state, JobState::Scheduled);
    assert_eq!(db.job(ids[6]).await.state, JobState::Available);

    // A batch claim takes them in the same order, and two claims never share a job.
    let more = insert_all(
        &*db.driver,
        (0..20).map(|_| JobFactory::new("k").state(JobState::Available, ago(1))).collect(),
    )
    .await;
    let (a, b) = tokio::join!(
        db.driver.job_claim(claim("work", 12, "node-a")),
        db.driver.job_claim(claim("work", 12, "node-b")),
    );
    let (a, b) = (a.expect("claim a"), b.expect("claim b"));
    assert_eq!(a.len() + b.len(), 20);
    let mut seen: HashSet<i64> = a.iter().map(|j| j.id).collect();
    assert!(b.iter().all(|j| seen.insert(j.id)), "no job is claimed twice");
    assert_eq!(seen, more.into_iter().collect());
}

/// 10,000 jobs on three workers of 50 slots each: every job runs once, at attempt 1, and
/// the nodes unregister on shutdown.
pub async fn three_workers_of_fifty_slots_run_each_job_exactly_once(db: TestDb) {
    let ledger = Ledger::new();
    let mut handles = Vec::new();
    for i in 0..3 {
        let worker = Worker::builder((db.another)(12))
            .queue("work", 50)
            .node_name(format!("node-{i}"))
            .registry(registry())
            .build()
            .expect("build");
        handles.push(worker.start().await.expect("start"));
    }
    enqueue_many(&db.driver, (0..10_000).map(|n| record::build(ledger.record(n)))).await.expect("enqueue");
    wait_for("all 10,000 jobs to complete", Duration::from_secs(180), || async {
        (db.count(Some(JobState::Completed)).await == 10_000).then_some(())
    })
    .await;
    for handle in handles {
        handle.shutdown().await.expect("shutdown");
    }
    let runs = ledger.runs();
    assert_eq!(runs.len(), 10_000);
    assert_eq!(runs.iter().map(|r| r.job).collect::<HashSet<_>>().len(), 10_000, "no job ran twice");
    assert_eq!(runs.iter().map(|r| r.n).collect::<HashSet<_>>().len(), 10_000);
    assert!(runs.iter().all(|r| r.attempt == 1));
    assert!(db.all_jobs().await.iter().all(|j| j.attempt == 1));
    let nodes = runs.iter().map(|r| r.node.as_str()).collect::<HashSet<_>>().len();
    println!("10,000 jobs ran exactly once, spread over {nodes} nodes");
    assert!(db.driver.node_list(NodeListParams {}).await.expect("nodes").is_empty(), "nodes unregistered");
}

/// Ten slots and two claims in flight, without a buffer: five jobs per claim at most.
pub async fn each_claim_asks_for_its_share_of_the_slots(db: TestDb) {
    let ledger = Ledger::new();
    enqueue_many(&db.driver, (0..40).map(|n| record::build(ledger.record(n)))).await.expect("enqueue");
    let worker = db.worker().claims_in_flight(2).prefetch_window(Duration::ZERO).build().expect("build");
    let handle = worker.start().await.expect("start");
    wait_for("all 40 jobs to complete", crate::DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 40).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
    // Each claim stamps its jobs with one claim time.
    let mut per_claim = std::collections::HashMap::new();
    for job in db.all_jobs().await {
        *per_claim.entry(job.attempted_at).or_insert(0) += 1;
    }
    assert_eq!(per_claim.values().max(), Some(&5), "{per_claim:?}");
    assert_eq!(ledger.runs().len(), 40);
}

/// A claim on a paused queue takes nothing, whatever the node believes about the queue
/// (the check is in the claim statement, not only in the worker): plain or under the
/// queue's limits. Resumed, the queue's jobs are claimed.
pub async fn a_claim_on_a_paused_queue_takes_nothing(db: TestDb) {
    let ledger = Ledger::new();
    let id = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    let pause = |paused| jobs_core::driver::QueueSetPausedParams { queue: "work", paused };
    db.driver.queue_set_paused(pause(true)).await.expect("pause");
    assert!(db.driver.job_claim(claim("work", 10, "n")).await.expect("claim").is_empty());
    let limited = JobClaimParams { limited: true, ..claim("work", 10, "n") };
    assert!(db.driver.job_claim(limited).await.expect("claim").is_empty(), "nor under the queue's limits");
    jobs_core::set_queue_limits(
        db.driver.clone(),
        "work",
        jobs_core::QueueLimits { global_limit: Some(5), ..Default::default() },
    )
    .await
    .expect("limits");
    assert!(db.driver.job_claim(limited).await.expect("claim").is_empty(), "a limited queue, paused");
    db.driver.queue_set_paused(pause(false)).await.expect("resume");
    let claimed = db.driver.job_claim(limited).await.expect("claim");
    assert_eq!(claimed.iter().map(|j| j.id).collect::<Vec<_>>(), vec![id]);
}
