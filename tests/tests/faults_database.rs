//! The database going away under running workers: `pg_ctl restart` of the cluster and
//! `pg_terminate_backend` of every worker session, in the middle of a run. The worker
//! processes reconnect with backoff, lose no job, run none twice, and never panic.
//!
//! Runs on a private cluster (it is restarted), never on `DATABASE_URL`.

use std::time::{Duration, Instant};

use jobs_core::enqueue_many;
use jobs_core::testing::cluster::TEST_SETTINGS;
use jobs_core::testing::{PgCluster, Server, TestDatabase};
use jobs_tests::fault_jobs::{Step, step};
use jobs_tests::faults::{COMPLETED, JobLedger, count, create_runs_table, try_count};
use jobs_tests::processes::{WorkerProcess, log_dir, stop_all};
use jobs_tests::wait_for;

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");
const JOBS: usize = 6_000;

/// Waits until `n` more jobs have completed than now.
async fn progress(pool: &jobs_core::postgres::Pool, n: i64, what: &str) {
    let before = try_count(pool, COMPLETED).await.unwrap_or(0);
    wait_for(what, Duration::from_secs(60), || async {
        (try_count(pool, COMPLETED).await? >= before + n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_and_killed_connections_lose_nothing() {
    let cluster = tokio::task::spawn_blocking(|| PgCluster::start_private(TEST_SETTINGS))
        .await
        .expect("start task")
        .expect("private cluster");
    let db = TestDatabase::on(Server::new(cluster.admin_url())).await.expect("test database");
    let pool = db.pool(4).expect("pool");
    let mut conn = db.connect().await.expect("connect");
    create_runs_table(&mut conn).await;
    drop(conn);
    enqueue_many(&pool, (0..JOBS).map(|i| step::build(Step { work_ms: 5 + (i as u64 % 4) * 5 })))
        .await
        .expect("enqueue");
    let logs = log_dir();
    let workers: Vec<WorkerProcess> =
        (1..=2).map(|n| WorkerProcess::start(BINARY, db.url(), &format!("node-{n}"), 20, &logs)).collect();
    let started = Instant::now();
    let cluster = std::sync::Arc::new(cluster);

    let mut restarts = 0;
    let mut terminated = 0;
    for round in 0..2 {
        progress(&pool, 400, &format!("progress before restart {round}")).await;
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || c.restart())
            .await
            .expect("restart task")
            .expect("pg_ctl restart");
        restarts += 1;
        for _ in 0..5 {
            progress(&pool, 150, "progress before terminating sessions").await;
            let mut admin =
                jobs_core::postgres::connect(&cluster.admin_url()).await.expect("admin connection");
            terminated += count(
                &mut admin,
                &format!(
                    "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
                     WHERE datname = '{}' AND pid <> pg_backend_pid()",
                    db.name()
                ),
            )
            .await;
        }
    }

    let ledger = JobLedger::wait_all_completed(&pool, JOBS, Duration::from_secs(180)).await;
    let elapsed = started.elapsed();
    let retry_lines: usize = stop_all(workers)
        .await
        .iter()
        .map(|log| log.lines().filter(|l| l.contains("retrying") || l.contains("reconnecting")).count())
        .sum();
    ledger.assert_exactly_once();
    println!(
        "faults_database: {restarts} pg_ctl restarts, {terminated} sessions terminated, {JOBS} jobs, \
         {} completed, {} lost, {} run twice at one attempt, {} retried, {} rescued, \
         {retry_lines} logged retries, {:.1}s",
        ledger.completed,
        ledger.lost(),
        ledger.duplicates,
        ledger.retried_jobs,
        ledger.rescued_jobs,
        elapsed.as_secs_f64()
    );
    assert!(terminated > 0, "sessions were terminated");
    assert!(retry_lines > 0, "the workers noticed the database going away and retried");
}
