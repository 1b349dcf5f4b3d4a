//! The worker's metrics: claimed, completed, failed, discarded counters, and the duration
//! and queue-latency histograms, observed through a recorder installed for this binary.

use std::time::Duration;

use jobs_core::testing::TestDatabase;
use jobs_core::{JobContext, JobState, Registry, Worker, enqueue_many, job};
use jobs_tests::wait_for;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

#[job(kind = "obs.work", queue = "obs", max_attempts = 2)]
async fn work(_ctx: JobContext, fail: bool) -> Result<(), std::io::Error> {
    if fail { Err(std::io::Error::other("nope")) } else { Ok(()) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_counts_claims_outcomes_durations_and_latency() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().expect("the only recorder in this test binary");

    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(6).expect("pool");
    let worker = Worker::builder(pool.clone())
        .queue("obs", 4)
        .registry(Registry::new().with::<work>().expect("registry"))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let ids: Vec<i64> = enqueue_many(&pool, [false, false, false, true].map(work::build))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    wait_for("the failure to become retryable", Duration::from_secs(30), || async {
        let mut conn = pool.get().await.ok()?;
        let row = jobs_core::get_job(&mut conn, ids[3]).await.ok()??;
        (row.state == JobState::Retryable).then_some(())
    })
    .await;
    // The completer also writes the per-minute counters the dashboard's chart reads, about
    // once a second while the worker runs (not only when it stops).
    let counted = || async {
        let driver = jobs_core::IntoDriver::into_driver(&pool);
        let minutes =
            driver.stats_throughput(jobs_core::driver::StatsThroughputParams::default()).await.ok()?;
        Some((
            minutes.iter().map(|m| m.completed).sum::<i64>(),
            minutes.iter().map(|m| m.retried).sum::<i64>(),
        ))
    };
    wait_for("the counters to be written while the worker runs", Duration::from_secs(30), || async {
        counted().await.filter(|&c| c == (3, 1))
    })
    .await;
    worker.shutdown().await.expect("shutdown");
    assert_eq!(counted().await, Some((3, 1)), "stopping writes nothing twice");
    // And the per-kind counters: outcomes, and a run and a wait time for each attempt.
    let driver = jobs_core::IntoDriver::into_driver(&pool);
    let hour = jobs_core::driver::StatsKindsParams { window: Duration::from_secs(3600), now: None };
    let kinds = driver.stats_kinds(hour).await.expect("kinds");
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    let k = &kinds[0];
    assert_eq!((k.kind.as_str(), k.completed, k.retried, k.discarded), ("obs.work", 3, 1, 0));
    assert_eq!((k.run.count(), k.wait.count()), (4, 4), "every attempt that ran");
    assert_eq!(k.failure_rate(), Some(0.25));
    assert!(k.run.quantile(0.95).is_some_and(|d| d < Duration::from_secs(5)), "{:?}", k.run);

    let mut counters = std::collections::HashMap::new();
    let mut histograms = std::collections::HashMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let name = key.key().name().to_owned();
        match value {
            DebugValue::Counter(n) => *counters.entry(name).or_insert(0) += n,
            DebugValue::Histogram(samples) => histograms.entry(name).or_insert_with(Vec::new).extend(samples),
            DebugValue::Gauge(_) => {}
        }
    }
    assert_eq!(counters.get("jobs_claimed_total"), Some(&4), "{counters:?}");
    assert_eq!(counters.get("jobs_completed_total"), Some(&3));
    assert_eq!(counters.get("jobs_failed_total"), Some(&1));
    assert_eq!(histograms.get("jobs_duration_seconds").map(Vec::len), Some(4));
    assert_eq!(histograms.get("jobs_queue_latency_seconds").map(Vec::len), Some(4));
}
