//! Worker processes killed with SIGKILL in the middle of their batches, again and again:
//! nothing is lost, nothing runs twice at the same attempt, nothing is left running.
//!
//! `JOBS_KILL_ROUNDS` sets the number of kills (20 by default; the long run uses 100:
//! `JOBS_KILL_ROUNDS=100 cargo test -p jobs-tests --test faults_kill -- --nocapture`).

use std::time::{Duration, Instant};

use jobs_core::enqueue_many;
use jobs_core::testing::TestDatabase;
use jobs_tests::fault_jobs::{Step, step};
use jobs_tests::faults::{COMPLETED, JobLedger, count, create_runs_table, try_count};
use jobs_tests::processes::{WorkerProcess, assert_no_panic, log_dir, stop_all};
use jobs_tests::wait_for;

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_workers_mid_batch_loses_nothing_and_runs_nothing_twice() {
    let rounds: usize = std::env::var("JOBS_KILL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let progress_per_round = 100;
    let mut jobs = 0;
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
    let mut conn = db.connect().await.expect("connect");
    create_runs_table(&mut conn).await;
    // Keeps work waiting, however fast the rounds go.
    let top_up = |pool: jobs_core::Pool| async move {
        let waiting = try_count(&pool, "SELECT count(*) AS n FROM jobs WHERE state <> 'completed'").await?;
        if waiting >= 1_000 {
            return Some(0);
        }
        let batch = 2_000;
        enqueue_many(&pool, (0..batch).map(|i| step::build(Step { work_ms: 5 + (i as u64 % 4) * 5 })))
            .await
            .ok()
            .map(|_| batch)
    };
    jobs += top_up(pool.clone()).await.expect("enqueue");

    let logs = log_dir();
    let mut next = 0;
    let start = |next: &mut usize| {
        *next += 1;
        WorkerProcess::start(BINARY, db.url(), &format!("node-{next}"), 20, &logs)
    };
    let mut workers = vec![start(&mut next), start(&mut next)];
    let started = Instant::now();
    let mut kills = 0;
    let mut killed_holding = 0;
    while kills < rounds {
        // Wait until the victim holds jobs and the queue has moved on since the last kill.
        let victim = workers[kills % 2].node.clone();
        jobs += top_up(pool.clone()).await.expect("enqueue");
        let before = count(&mut conn, COMPLETED).await;
        let held_by_victim = format!(
            "SELECT count(*) AS n FROM jobs WHERE state = 'running' \
             AND attempted_by[cardinality(attempted_by)] = '{victim}'"
        );
        let holding = wait_for(
            &format!("{victim} to hold jobs and the queue to progress"),
            Duration::from_secs(60),
            || async {
                let done = try_count(&pool, COMPLETED).await?;
                let held = try_count(&pool, &held_by_victim).await?;
                (done >= before + progress_per_round as i64 && held > 0).then_some(held)
            },
        )
        .await;
        let process = workers.remove(kills % 2);
        assert_no_panic(&victim, &process.kill9().await);
        killed_holding += holding;
        kills += 1;
        workers.insert(kills.saturating_sub(1) % 2, start(&mut next));
    }

    let ledger = JobLedger::wait_all_completed(&pool, jobs, Duration::from_secs(180)).await;
    let elapsed = started.elapsed();
    stop_all(workers).await;
    ledger.assert_exactly_once();
    println!(
        "faults_kill: {kills} SIGKILLs (holding {killed_holding} running jobs in all), {jobs} jobs, \
         {} completed, {} lost, {} run twice at one attempt, {} retried after a rescue, {:.1}s",
        ledger.completed,
        ledger.lost(),
        ledger.duplicates,
        ledger.rescued_jobs,
        elapsed.as_secs_f64()
    );
    assert!(ledger.rescued_jobs > 0, "killing workers holding jobs must lead to rescues");
}
