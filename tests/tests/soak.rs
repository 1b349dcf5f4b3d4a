//! Soak: many jobs through four worker processes. The completion count is exact, no row
//! is left running, nothing is retried, and the workers' memory stays flat.
//!
//! `JOBS_SOAK_JOBS` sets the number of jobs (100,000 by default; the long run uses a
//! million: `JOBS_SOAK_JOBS=1000000 cargo test --release -p jobs-tests --test soak -- --nocapture`).

use std::time::{Duration, Instant};

use jobs_core::enqueue_many;
use jobs_core::testing::TestDatabase;
use jobs_tests::fault_jobs::noop;
use jobs_tests::faults::{COMPLETED, JobLedger, try_count};
use jobs_tests::processes::{WorkerProcess, log_dir, stop_all};

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");
const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_completes_every_job_once_with_flat_memory() {
    let jobs: usize = std::env::var("JOBS_SOAK_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(10_000) {
        enqueue_many(&pool, chunk.iter().map(|_| noop::build(()))).await.expect("enqueue");
    }
    let logs = log_dir();
    let workers: Vec<WorkerProcess> = (1..=WORKERS)
        .map(|n| WorkerProcess::start(BINARY, db.url(), &format!("soak-{n}"), 50, &logs))
        .collect();
    let started = Instant::now();

    // Memory of every worker, sampled as the run goes: (fraction done, total RSS in KiB).
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let total = jobs as i64;
    // Sampled every 100 ms until every job is done (or the deadline fails the test).
    let deadline = Duration::from_secs(1_800);
    let mut every = tokio::time::interval(Duration::from_millis(100));
    loop {
        every.tick().await;
        let rss: u64 = workers.iter().filter_map(WorkerProcess::rss_kib).sum();
        if let Some(done) = try_count(&pool, COMPLETED).await {
            samples.push((done as f64 / total as f64, rss));
            if done >= total {
                break;
            }
        }
        assert!(started.elapsed() < deadline, "the soak did not finish within {deadline:?}");
    }
    let elapsed = started.elapsed();
    let ledger = JobLedger::read(&pool, total).await;
    stop_all(workers).await;
    ledger.assert_exactly_once();
    assert_eq!(ledger.retried_jobs, 0, "no job needed a second attempt: {ledger:?}");

    // Flat memory: the peak over the second half of the run is within a small margin of
    // the peak over the first half (after warm-up at 10 %).
    let peak = |from: f64, to: f64| {
        samples.iter().filter(|(f, _)| *f >= from && *f < to).map(|(_, r)| *r).max().unwrap_or(0)
    };
    let (first, second) = (peak(0.1, 0.5), peak(0.5, 1.01));
    println!(
        "soak: {jobs} jobs, {WORKERS} workers, {:.1}s ({:.0} jobs/s), {} completed, {} lost, {} running, \
         {} retried; RSS of all workers: peak {} KiB in 10–50 %, {} KiB in 50–100 % ({} samples)",
        elapsed.as_secs_f64(),
        jobs as f64 / elapsed.as_secs_f64(),
        ledger.completed,
        ledger.lost(),
        ledger.running,
        ledger.retried_jobs,
        first,
        second,
        samples.len()
    );
    assert!(first > 0 && second > 0, "memory was sampled in both halves: {samples:?}");
    assert!(second <= first + first / 10 + 4 * 1024, "worker memory grew from {first} KiB to {second} KiB");
}
