//! A worker process frozen for 15 s (SIGSTOP, as a paused VM or an overloaded host does)
//! while it runs 40 s jobs, then resumed (SIGCONT). Its node is judged gone meanwhile (its
//! liveness lock is still held, but it has not heartbeated for `node_stale_after`), and
//! its jobs are rescued; the other node, the leader, has no free slot, so the frozen node
//! claims its own jobs again when it wakes, while their first runs still go on. The two
//! runs of each job are kept apart: the first ones' outcomes are fenced out, the second
//! ones complete. Every job completes, no (job, attempt) runs twice. Then a second process
//! started with the live node's name refuses to start, naming the holder.
//!
//! On SQLite a process frozen while it holds the database's one write lock stops every
//! other writer until it resumes (no rescue can be written meanwhile); the same end holds.
//!
//! About a minute per backend (the jobs take 40 s).

use std::sync::Arc;
use std::time::Duration;

use jobs_core::driver::{Driver, JobFilter, JobListParams};
use jobs_core::testing::{MysqlTestDatabase, SqliteTestDatabase, TestDatabase};
use jobs_core::{IntoDriver, JobState, enqueue_many};
use jobs_tests::any_db::{AnyDb, RUNS_TABLE};
use jobs_tests::fault_jobs::{Step, step};
use jobs_tests::faults::JobLedger;
use jobs_tests::processes::{WorkerProcess, log_dir, stop_all};
use jobs_tests::wait_for;
use nix::sys::signal::Signal;

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");

/// How many jobs `node` runs now.
async fn running_on(driver: &dyn Driver, node: &str) -> Option<usize> {
    let filter = JobFilter { states: vec![JobState::Running], ..JobFilter::default() };
    let running =
        driver.job_list(JobListParams { filter: &filter, before: None, limit: 1_000 }).await.ok()?;
    Some(running.iter().filter(|j| j.attempted_by.last().is_some_and(|n| n == node)).count())
}

async fn enqueue_long_jobs(driver: &Arc<dyn Driver>, n: usize) {
    enqueue_many(driver, (0..n).map(|_| step::build(Step { work_ms: 40_000 }))).await.expect("enqueue");
}

async fn frozen_worker(url: &str, driver: Arc<dyn Driver>) {
    AnyDb::of(&*driver).execute(RUNS_TABLE).await.expect("runs table");
    let logs = log_dir();
    // The library's default timings: node_stale_after 8 s, heartbeats every second.
    let start = |node: &str, slots: usize| {
        WorkerProcess::start_with(BINARY, url, node, slots, &logs, &["--defaults"])
    };
    let deadline = Duration::from_secs(60);
    // The leader, its two slots busy for the whole test.
    let leader = start("leader", 2);
    enqueue_long_jobs(&driver, 2).await;
    wait_for("the leader to run its two jobs", deadline, || async {
        (running_on(&*driver, "leader").await? == 2).then_some(())
    })
    .await;
    // Slots to spare: woken, it claims its rescued jobs again at once, beside their first
    // runs.
    let frozen = start("frozen", 8);
    enqueue_long_jobs(&driver, 4).await;
    wait_for("the frozen node to run four jobs", deadline, || async {
        (running_on(&*driver, "frozen").await? == 4).then_some(())
    })
    .await;

    frozen.signal(Signal::SIGSTOP);
    let stopped = std::time::Instant::now();
    // Postgres and MariaDB/MySQL: the leader rescues the frozen node's jobs once its
    // heartbeat is 8 s old. SQLite: a process frozen while it holds the database's one
    // write lock (it commits with a disk flush, so a process that writes holds it often)
    // stops every writer until it resumes; its jobs are rescued, if at all, after.
    let sqlite = driver.name() == "sqlite";
    if !sqlite {
        wait_for("the frozen node's jobs to be rescued", deadline, || async {
            (running_on(&*driver, "frozen").await? == 0).then_some(())
        })
        .await;
    }
    // Frozen 15 s in all: fault injection, not a wait for a condition.
    tokio::time::sleep(Duration::from_secs(15).saturating_sub(stopped.elapsed())).await;
    frozen.signal(Signal::SIGCONT);

    let ledger = JobLedger::wait_all_completed(driver.clone(), 6, Duration::from_secs(180)).await;
    ledger.assert_exactly_once();
    let runs = AnyDb::of(&*driver).runs().await.expect("runs");
    let again = runs.iter().filter(|r| r.node == "frozen" && r.attempt == 2).count();
    if !sqlite {
        assert!(runs.iter().any(|r| r.attempt == 2), "the frozen node's jobs ran again: {runs:?}");
    }
    println!(
        "frozen worker ({}): {} jobs rescued from it, {again} claimed again by it while their first \
         runs went on; {} completed, {} run twice at one attempt, {} runs in all",
        driver.name(),
        ledger.rescued_jobs,
        ledger.completed,
        ledger.duplicates,
        runs.len()
    );

    // The same name again, while its holder lives: refused.
    let mut twin = start("frozen", 1);
    let status = twin.wait(Duration::from_secs(30)).await;
    let log = twin.log_text();
    assert!(!status.success(), "a second `frozen` started:\n{log}");
    assert!(log.contains("is in use by a live process"), "{log}");
    stop_all(vec![leader, frozen]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_completes_every_job_once_on_postgres() {
    let db = TestDatabase::new().await.expect("test database");
    let driver = db.pool(4).expect("pool").into_driver();
    frozen_worker(db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_completes_every_job_once_on_sqlite() {
    let db = SqliteTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    frozen_worker(&db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_completes_every_job_once_on_mysql_or_mariadb() {
    let db = MysqlTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    frozen_worker(db.url(), driver).await;
}
