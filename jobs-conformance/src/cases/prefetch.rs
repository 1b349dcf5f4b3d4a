//! The local buffer of claimed jobs (`WorkerBuilder::prefetch_window`): the priority
//! bound, fairness between nodes, bookkeeping (visible as the node's, handed back on
//! shutdown, pause and a long wait, rescued when the node dies) and timeouts that start
//! at the run.

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{JobCancelManyParams, JobGetParams, JobState, NodeListParams, QueueSetPausedParams};
use jobs_core::{IntoNewJob, QueueConfig, WorkerBuilder, WorkerHandle, enqueue_many};

use crate::cases::rescue::{heartbeat, start_survivor};
use crate::jobs::{Ledger, nap, record, wait_until_cancelled};
use crate::{DEADLINE, TestDb};
use jobs_core::testing::wait_for;

/// A window long enough that the buffer's target is its cap as soon as one job ran: the
/// cases decide what is buffered, not the machine's speed.
const ALWAYS: Duration = Duration::from_secs(3600);

/// One node running "work" with one slot and a buffer of up to 5.
fn one_slot(db: &TestDb, node: &str) -> WorkerBuilder {
    db.worker()
        .node_name(node)
        .queue_config(QueueConfig::new("work", 1).prefetch(5))
        .prefetch_window(ALWAYS)
        .without_maintenance()
}

/// Builds and starts a worker.
async fn start(builder: WorkerBuilder) -> WorkerHandle {
    builder.build().expect("build").start().await.expect("start")
}

/// Runs three quick jobs so that the node knows its run time (and buffers from then on).
async fn warm_up(db: &TestDb, handle: &WorkerHandle) {
    let ledger = Ledger::new();
    let warm =
        enqueue_many(&db.driver, (0..3).map(|n| record::build(ledger.record(n)))).await.expect("enqueue");
    for e in &warm {
        db.wait_state(e.id, JobState::Completed).await;
    }
    assert_eq!(handle.buffered(), 0);
}

/// A blocking job in the only slot and two quick ones behind it, which the node claims
/// into its buffer. Returns (blocker, buffered ids).
async fn block_and_buffer(db: &TestDb, handle: &WorkerHandle, ledger: &Ledger) -> (i64, Vec<i64>) {
    let blocker = wait_until_cancelled::build(()).priority(0).into_new_job().expect("row");
    let quick = (0..2).map(|n| record::build(ledger.record(n)).priority(1).into_new_job().expect("row"));
    let ids: Vec<i64> = enqueue_many(&db.driver, std::iter::once(blocker).chain(quick))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    wait_for("the blocker running and two jobs buffered", DEADLINE, || async {
        (handle.running() == 1 && handle.buffered() == 2).then_some(())
    })
    .await;
    (ids[0], ids[1..].to_vec())
}

/// A job of higher priority than the buffered ones overtakes them: after it is enqueued,
/// at most the buffer, one claim and the slots' worth of lower-priority jobs start before
/// it does, however many are queued.
pub async fn a_higher_priority_job_overtakes_the_buffer(db: TestDb) {
    const SLOTS: usize = 2;
    const CAP: usize = 20;
    let handle = start(
        db.worker()
            .queue_config(QueueConfig::new("work", SLOTS).prefetch(CAP))
            .prefetch_window(ALWAYS)
            .without_maintenance(),
    )
    .await;
    let ledger = Ledger::new();
    // Jobs of about a millisecond: the two slots take a few seconds over them.
    enqueue_many(&db.driver, (0..3_000).map(|n| nap::build(ledger.nap(n, 1)).priority(5)))
        .await
        .expect("enqueue");
    wait_for("the buffer in use", DEADLINE, || async {
        (ledger.runs().len() >= 100 && handle.buffered() > 0).then_some(())
    })
    .await;
    let urgent = record::build(ledger.record(-1)).priority(0).enqueue(&db.driver).await.expect("enqueue").id;
    let enqueued_after = ledger.runs().len();
    let runs = wait_for("the urgent job to run", DEADLINE, || async {
        let runs = ledger.runs();
        runs.iter().any(|r| r.job == urgent).then_some(runs)
    })
    .await;
    let at = runs.iter().position(|r| r.job == urgent).unwrap_or(runs.len());
    let overtaken = at.saturating_sub(enqueued_after);
    // The buffer at the enqueue, a claim already on its way (free slots plus a refill),
    // and the jobs the slots had taken but not yet recorded.
    let bound = CAP + (SLOTS + CAP.div_ceil(2)) + SLOTS;
    assert!(
        overtaken <= bound,
        "{overtaken} lower-priority jobs started after the urgent one was enqueued (bound {bound})"
    );
    assert!(runs.len() < 3_001, "the urgent job ran before the queue was drained");
    handle.shutdown().await.expect("shutdown");
}

/// Two nodes on one queue of jobs that take a while both get work: a node buffers what
/// its slots finish in the window, not what it could grab.
pub async fn two_nodes_on_one_queue_both_get_work(db: TestDb) {
    let node = |name: &'static str, driver| {
        jobs_core::Worker::builder(driver)
            .queue("work", 2)
            .registry(crate::jobs::registry())
            .node_name(name)
            .poll_interval(Duration::from_millis(200))
            .without_maintenance()
    };
    let a = start(node("node-a", db.driver.clone())).await;
    let b = start(node("node-b", (db.another)(4))).await;
    let ledger = Ledger::new();
    // Warm both nodes up with one job each (so both know their run time and may buffer).
    let warm =
        enqueue_many(&db.driver, (0..8).map(|n| nap::build(ledger.nap(n, 25)))).await.expect("enqueue");
    for e in &warm {
        db.wait_state(e.id, JobState::Completed).await;
    }
    let ids = enqueue_many(&db.driver, (0..40).map(|n| nap::build(ledger.nap(100 + n, 25))))
        .await
        .expect("enqueue");
    for e in &ids {
        db.wait_state(e.id, JobState::Completed).await;
    }
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for run in ledger.runs().iter().filter(|r| r.n >= 100) {
        *per_node.entry(run.node.clone()).or_default() += 1;
    }
    for node in ["node-a", "node-b"] {
        let ran = per_node.get(node).copied().unwrap_or(0);
        assert!(ran >= 10, "{node} ran {ran} of 40 jobs ({per_node:?}): the other node hoarded them");
    }
    a.shutdown().await.expect("shutdown");
    b.shutdown().await.expect("shutdown");
}

/// Buffered jobs are claimed in the database as the node's (running, its name, the
/// attempt counted) and counted on its node row; on shutdown they go back at once, their
/// attempt given back and no error recorded, while the running job is handed back at the
/// deadline as before.
pub async fn buffered_jobs_are_the_nodes_and_go_back_on_shutdown(db: TestDb) {
    // Far longer than the case may wait: only the shutdown can send them back.
    let builder = one_slot(&db, "buffering").prefetch_max_wait(Duration::from_secs(600));
    let handle = start(builder.shutdown_timeout(Duration::from_millis(300))).await;
    warm_up(&db, &handle).await;
    let (blocker, buffered) = block_and_buffer(&db, &handle, &Ledger::new()).await;
    for &id in &buffered {
        let row = db.job(id).await;
        assert_eq!((row.state, row.attempt), (JobState::Running, 1));
        assert_eq!(row.attempted_by, vec!["buffering".to_owned()]);
    }
    wait_for("the node row to count the buffer", DEADLINE, || async {
        let nodes = db.driver.node_list(NodeListParams {}).await.ok()?;
        let node = nodes.iter().find(|n| n.name == "buffering")?;
        (node.queues["work"]["buffered"] == 2 && node.queues["work"]["running"] == 1).then_some(())
    })
    .await;

    assert_eq!(handle.buffered(), 2, "still buffered when the shutdown starts");
    let report = handle.shutdown().await.expect("shutdown");
    assert_eq!(report.handed_back, 1, "only the running job reaches the deadline");
    for &id in &buffered {
        let row = db.job(id).await;
        assert_eq!((row.state, row.attempt), (JobState::Available, 0), "job {id}");
        assert_eq!(row.errors, serde_json::json!([]), "a job that never ran records no error");
    }
    let row = db.job(blocker).await;
    assert_eq!((row.state, row.attempt), (JobState::Retryable, 1), "it ran: its attempt number stays");
}

/// A node killed with jobs in its buffer: the rescuer hands them back and another node
/// runs them.
pub async fn a_killed_nodes_buffered_jobs_are_rescued(db: TestDb) {
    let doomed = start(one_slot(&db, "doomed").prefetch_max_wait(Duration::from_secs(600))).await;
    warm_up(&db, &doomed).await;
    let ledger = Ledger::new();
    let (blocker, buffered) = block_and_buffer(&db, &doomed, &ledger).await;
    doomed.kill();
    // Its row says it was last seen a minute ago (rather than wait for it to go stale).
    heartbeat(&db, "doomed", Utc::now() - chrono::Duration::minutes(1)).await;
    let survivor = start_survivor(&db).await;
    for &id in &buffered {
        let row = db.wait_state(id, JobState::Completed).await;
        assert_eq!(row.attempted_by, vec!["doomed".to_owned(), "survivor".to_owned()]);
        assert_eq!(row.errors[0]["error_type"], "rescued_node_lost");
    }
    let ran: Vec<String> = ledger.runs().into_iter().map(|r| r.node).collect();
    assert_eq!(ran, vec!["survivor".to_owned(), "survivor".to_owned()], "the dead node never ran them");
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[blocker] }).await.expect("cancel");
    survivor.shutdown().await.expect("shutdown");
}

/// A buffered job's timeout starts when it runs: one that waited longer than its timeout
/// for the slot, then runs within it, completes.
pub async fn a_buffered_jobs_timeout_starts_when_it_runs(db: TestDb) {
    let handle = start(one_slot(&db, "patient").prefetch_max_wait(Duration::from_secs(3))).await;
    warm_up(&db, &handle).await;
    let ledger = Ledger::new();
    let blocker = wait_until_cancelled::build(()).priority(0).into_new_job().expect("row");
    // 300 ms timeout; takes 150 ms.
    let slow = nap::build(ledger.nap(1, 150)).priority(1).into_new_job().expect("row");
    let ids: Vec<i64> =
        enqueue_many(&db.driver, [blocker, slow]).await.expect("enqueue").iter().map(|e| e.id).collect();
    let (blocker, slow) = (ids[0], ids[1]);
    wait_for("the nap buffered for longer than its timeout", DEADLINE, || async {
        let row = db.driver.job_get(JobGetParams { id: slow }).await.ok()??;
        let waited = Utc::now() - row.attempted_at?;
        (handle.buffered() == 1 && waited > chrono::Duration::milliseconds(500)).then_some(())
    })
    .await;
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[blocker] }).await.expect("cancel");
    let row = db.wait_state(slow, JobState::Completed).await;
    assert_eq!(row.attempt, 1);
    assert_eq!(row.errors, serde_json::json!([]), "no timeout");
    handle.shutdown().await.expect("shutdown");
}

/// A buffered job that waits longer than `prefetch_max_wait` goes back, and a node with a
/// free slot runs it; the busy node does not claim ahead again until a slot of its frees.
pub async fn a_buffered_job_that_waits_too_long_goes_to_a_free_node(db: TestDb) {
    let busy = start(one_slot(&db, "busy").prefetch_max_wait(Duration::from_secs(2))).await;
    warm_up(&db, &busy).await;
    let ledger = Ledger::new();
    let (blocker, buffered) = block_and_buffer(&db, &busy, &ledger).await;
    let idle = start(db.worker().node_name("idle").without_maintenance()).await;
    for &id in &buffered {
        let row = db.wait_state(id, JobState::Completed).await;
        assert_eq!(row.attempt, 1, "the wait in the buffer used no attempt");
        // Not claimed back by the busy node: it buffers nothing until a slot of its frees.
        assert_eq!(row.attempted_by, vec!["busy".to_owned(), "idle".to_owned()]);
    }
    let ran: Vec<String> = ledger.runs().into_iter().map(|r| r.node).collect();
    assert_eq!(ran, vec!["idle".to_owned(), "idle".to_owned()]);
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[blocker] }).await.expect("cancel");
    idle.shutdown().await.expect("shutdown");
    busy.shutdown().await.expect("shutdown");
}

/// A job of higher priority claimed while lower ones wait in the buffer starts before
/// them, whichever claim brought it.
pub async fn a_buffered_job_of_higher_priority_starts_first(db: TestDb) {
    let handle = start(one_slot(&db, "ordered").prefetch_max_wait(Duration::from_secs(600))).await;
    warm_up(&db, &handle).await;
    let ledger = Ledger::new();
    let (blocker, _) = block_and_buffer(&db, &handle, &ledger).await;
    let urgent = record::build(ledger.record(-1)).priority(0).enqueue(&db.driver).await.expect("enqueue").id;
    wait_for("the urgent job buffered behind the blocker", DEADLINE, || async {
        (handle.buffered() == 3).then_some(())
    })
    .await;
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[blocker] }).await.expect("cancel");
    let runs = wait_for("the three buffered jobs to run", DEADLINE, || async {
        let runs = ledger.runs();
        (runs.len() == 3).then_some(runs)
    })
    .await;
    assert_eq!(runs[0].job, urgent, "{runs:?}");
    handle.shutdown().await.expect("shutdown");
}

/// Pausing the queue sends its buffered jobs back at once, their attempt given back.
pub async fn pausing_a_queue_hands_its_buffer_back(db: TestDb) {
    // Far longer than the case may wait: only the pause can send them back.
    let busy = start(one_slot(&db, "busy").prefetch_max_wait(Duration::from_secs(600))).await;
    warm_up(&db, &busy).await;
    let (blocker, buffered) = block_and_buffer(&db, &busy, &Ledger::new()).await;
    db.driver.queue_set_paused(QueueSetPausedParams { queue: "work", paused: true }).await.expect("pause");
    for &id in &buffered {
        let row = db.wait_state(id, JobState::Available).await;
        assert_eq!(row.attempt, 0);
    }
    assert_eq!(busy.buffered(), 0);
    assert_eq!(db.job(blocker).await.state, JobState::Running, "the running job carries on");
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[blocker] }).await.expect("cancel");
    busy.shutdown().await.expect("shutdown");
}
