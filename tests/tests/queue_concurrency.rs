//! A queue's concurrency set for the whole cluster (the dashboard's queue setting) takes
//! effect on a running worker at its next poll: lowered, no new job starts beyond it while
//! the running ones finish; raised, more start at once; cleared, the worker's own setting
//! is back. On SQLite (one real file), as every backend stores it the same way (the
//! conformance suite checks the stored settings).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jobs_core::driver::{Driver, NodeListParams, QueueSetConcurrencyParams};
use jobs_core::testing::{SqliteTestDatabase, wait_for};
use jobs_core::{JobContext, Registry, Worker, enqueue_many, job};
use tokio::sync::Semaphore;

const DEADLINE: Duration = Duration::from_secs(30);

/// Handlers running now, and the most at once, for jobs of each phase (`args / 100`).
static RUNNING: [AtomicUsize; 3] = [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)];
static MOST: [AtomicUsize; 3] = [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)];
static DONE: AtomicUsize = AtomicUsize::new(0);
/// Each job waits for a permit the test gives.
static GATE: Semaphore = Semaphore::const_new(0);

#[job(kind = "limits.hold", queue = "limited", max_attempts = 1)]
async fn hold(_ctx: JobContext, n: usize) -> Result<(), std::io::Error> {
    let phase = n / 100;
    let now = RUNNING[phase].fetch_add(1, Ordering::SeqCst) + 1;
    MOST[phase].fetch_max(now, Ordering::SeqCst);
    GATE.acquire().await.map_err(std::io::Error::other)?.forget();
    RUNNING[phase].fetch_sub(1, Ordering::SeqCst);
    DONE.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// The limit the worker reports for the queue in its heartbeat.
async fn reported_limit(driver: &std::sync::Arc<dyn Driver>) -> Option<i64> {
    let nodes = driver.node_list(NodeListParams {}).await.ok()?;
    nodes.first()?.queues.get("limited")?.get("limit")?.as_i64()
}

async fn set(driver: &std::sync::Arc<dyn Driver>, concurrency: Option<i32>) {
    let params = QueueSetConcurrencyParams { queue: "limited", concurrency };
    driver.queue_set_concurrency(params).await.expect("set the cluster's concurrency");
    let expected = i64::from(concurrency.unwrap_or(4));
    wait_for("the worker to report the new limit", DEADLINE, || async {
        (reported_limit(driver).await == Some(expected)).then_some(())
    })
    .await;
}

async fn running(phase: usize, n: usize) {
    wait_for(&format!("{n} jobs of phase {phase} to run"), DEADLINE, || async {
        (RUNNING[phase].load(Ordering::SeqCst) == n).then_some(())
    })
    .await;
}

async fn done(n: usize) {
    wait_for(&format!("{n} jobs to finish"), DEADLINE, || async {
        (DONE.load(Ordering::SeqCst) == n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_wide_concurrency_lowers_raises_and_clears_on_a_running_worker() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = jobs_core::IntoDriver::into_driver(db.driver(4).expect("driver"));
    let worker = Worker::builder(driver.clone())
        .queue("limited", 4)
        .registry(Registry::new().with::<hold>().expect("registry"))
        .poll_interval(Duration::from_millis(100))
        .heartbeat_interval(Duration::from_millis(200))
        .build()
        .expect("worker")
        .start()
        .await
        .expect("start");

    // Phase 0: one at a time, across the cluster.
    set(&driver, Some(1)).await;
    enqueue_many(&driver, (0..5).map(hold::build)).await.expect("enqueue");
    for finished in 0..5 {
        running(0, 1).await;
        GATE.add_permits(1);
        done(finished + 1).await;
    }
    assert_eq!(MOST[0].load(Ordering::SeqCst), 1, "never more than the cluster's limit");

    // Phase 1: back to the worker's own 4, all at once.
    set(&driver, None).await;
    enqueue_many(&driver, (100..104).map(hold::build)).await.expect("enqueue");
    running(1, 4).await;

    // Phase 2: lowered to 2 while 4 run. They finish; then no more than 2 new ones run.
    set(&driver, Some(2)).await;
    enqueue_many(&driver, (200..204).map(hold::build)).await.expect("enqueue");
    GATE.add_permits(4);
    done(5 + 4).await;
    running(2, 2).await;
    GATE.add_permits(4);
    done(5 + 4 + 4).await;
    assert_eq!(MOST[2].load(Ordering::SeqCst), 2, "lowered while busy: the new jobs ran two at a time");
    assert_eq!(MOST[1].load(Ordering::SeqCst), 4);

    worker.shutdown().await.expect("shutdown");
}
