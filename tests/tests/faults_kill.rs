//! Worker processes killed with SIGKILL in the middle of their batches, again and again:
//! nothing is lost, nothing runs twice at the same attempt, nothing is left running. On
//! Postgres, on SQLite with both workers on one database file, and on MariaDB (or MySQL,
//! with `JOBS_MYSQL_BIN`), whose server is also restarted mid-run.
//!
//! `JOBS_KILL_ROUNDS` sets the number of kills (20 by default; the long run uses 100:
//! `JOBS_KILL_ROUNDS=100 cargo test -p jobs-tests --test faults_kill -- --nocapture`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jobs_core::driver::Driver;
use jobs_core::mysql::testing::{LocalServer, Server as MysqlServer};
use jobs_core::testing::{MysqlTestDatabase, SqliteTestDatabase, TestDatabase};
use jobs_core::{IntoDriver, JobState, enqueue_many};
use jobs_tests::any_db::{AnyDb, RUNS_TABLE};
use jobs_tests::fault_jobs::{Step, once, step};
use jobs_tests::faults::{JobLedger, held_by, try_count_states};
use jobs_tests::processes::{WorkerProcess, assert_no_panic, log_dir, stop_all};
use jobs_tests::wait_for;

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");

/// Keeps work waiting, however fast the rounds go. Returns how many jobs it added, or
/// `None` when the database did not answer (it is being restarted): ask again.
async fn top_up(driver: &Arc<dyn Driver>) -> Option<usize> {
    let waiting =
        try_count_states(&**driver, &[JobState::Available, JobState::Running, JobState::Retryable]).await?;
    if waiting >= 1_000 {
        return Some(0);
    }
    let batch = 2_000;
    enqueue_many(driver, (0..batch).map(|i| step::build(Step { work_ms: 5 + (i as u64 % 4) * 5 })))
        .await
        .ok()
        .map(|_| batch)
}

/// Two workers on the database at `url`; one of them killed `rounds` times (alternately),
/// each time while it holds jobs, a new one started in its place; then every job must
/// have completed exactly once.
async fn kill_workers_again_and_again(url: &str, driver: Arc<dyn Driver>, restart: Option<&dyn Fn()>) {
    let rounds: usize = std::env::var("JOBS_KILL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let progress_per_round = 100;
    AnyDb::of(&*driver).execute(RUNS_TABLE).await.expect("runs table");
    let top_up_within = |what: &'static str| {
        let driver = driver.clone();
        async move { wait_for(what, Duration::from_secs(60), || top_up(&driver)).await }
    };
    let mut jobs = top_up_within("the first jobs to be enqueued").await;

    let logs = log_dir();
    let mut next = 0;
    let start = |next: &mut usize| {
        *next += 1;
        WorkerProcess::start(BINARY, url, &format!("node-{next}"), 20, &logs)
    };
    let mut workers = vec![start(&mut next), start(&mut next)];
    let started = Instant::now();
    let mut kills = 0;
    let mut killed_holding = 0;
    let mut restarts = 0;
    while kills < rounds {
        // Wait until the victim holds jobs and the queue has moved on since the last kill.
        let victim = workers[kills % 2].node.clone();
        jobs += top_up_within("more jobs to be enqueued").await;
        let before = wait_for("a count of completed jobs", Duration::from_secs(60), || {
            try_count_states(&*driver, &[JobState::Completed])
        })
        .await;
        let holding = wait_for(
            &format!("{victim} to hold jobs and the queue to progress"),
            Duration::from_secs(60),
            || async {
                let done = try_count_states(&*driver, &[JobState::Completed]).await?;
                let held = held_by(&*driver, &victim).await?;
                (done >= before + progress_per_round && held > 0).then_some(held)
            },
        )
        .await;
        let process = workers.remove(kills % 2);
        assert_no_panic(&victim, &process.kill9().await);
        killed_holding += holding;
        kills += 1;
        workers.insert(kills.saturating_sub(1) % 2, start(&mut next));
        if let Some(restart) = restart.filter(|_| kills == rounds / 2) {
            // Halfway: the database server itself goes away and comes back.
            restart();
            restarts += 1;
        }
    }

    let ledger = JobLedger::wait_all_completed(driver.clone(), jobs, Duration::from_secs(180)).await;
    let elapsed = started.elapsed();
    stop_all(workers).await;
    ledger.assert_exactly_once();
    println!(
        "faults_kill ({}): {kills} SIGKILLs (holding {killed_holding} running jobs in all), \
         {restarts} server restarts, {jobs} jobs, \
         {} completed, {} lost, {} run twice at one attempt, {} retried after a rescue, {:.1}s",
        driver.name(),
        ledger.completed,
        ledger.lost(),
        ledger.duplicates,
        ledger.rescued_jobs,
        elapsed.as_secs_f64()
    );
    assert!(ledger.rescued_jobs > 0, "killing workers holding jobs must lead to rescues");
}

/// The kill loop: three worker processes (20 slots each, claiming ahead: the default) on
/// `JOBS_KILL_LOOP_JOBS` (20,000) jobs of a single attempt; every 2–3 s one of them, at
/// random, is killed with SIGKILL and a new one started in its place. Every job must end
/// completed by exactly one run: a job lost with its node (buffered, running, or with its
/// outcome unwritten) runs again at a new attempt, which does not count against its one.
async fn kill_loop(url: &str, driver: Arc<dyn Driver>) {
    let jobs: usize =
        std::env::var("JOBS_KILL_LOOP_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    AnyDb::of(&*driver).execute(RUNS_TABLE).await.expect("runs table");
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1_000) {
        // 20–50 ms of work: the loop kills workers several times before the queue is done.
        let batch = chunk.iter().map(|i| once::build(Step { work_ms: 20 + (*i as u64 % 4) * 10 }));
        enqueue_many(&driver, batch).await.expect("enqueue");
    }
    let logs = log_dir();
    let mut next = 0;
    let start = |next: &mut usize| {
        *next += 1;
        WorkerProcess::start(BINARY, url, &format!("loop-{next}"), 20, &logs)
    };
    let mut workers: Vec<WorkerProcess> = (0..3).map(|_| start(&mut next)).collect();
    let started = Instant::now();
    let (mut kills, mut killed_holding) = (0, 0);
    // Every job finished, one way or another (a discarded one fails the ledger below).
    let all_done = || async {
        let finished = try_count_states(&*driver, &JobState::FINAL).await?;
        (finished >= jobs as i64).then_some(())
    };
    let mut rng = rand::rng();
    loop {
        let gap = Duration::from_millis(rand::Rng::random_range(&mut rng, 2_000..3_000));
        let done = tokio::time::timeout(gap, async {
            while all_done().await.is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        if done.is_ok() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "the kill loop did not finish in 10 minutes");
        let victim = workers.remove(rand::Rng::random_range(&mut rng, 0..workers.len()));
        killed_holding += held_by(&*driver, &victim.node).await.unwrap_or(0);
        let node = victim.node.clone();
        assert_no_panic(&node, &victim.kill9().await);
        kills += 1;
        workers.push(start(&mut next));
    }
    let ledger = JobLedger::read(driver.clone(), jobs as i64).await;
    let elapsed = started.elapsed();
    stop_all(workers).await;
    ledger.assert_exactly_once();
    println!(
        "kill loop ({}): {kills} SIGKILLs every 2-3 s (holding {killed_holding} running jobs in all), \
         {jobs} jobs of one attempt, {} completed, {} lost, {} run twice at one attempt, \
         {} ran again after a rescue, {:.1}s",
        driver.name(),
        ledger.completed,
        ledger.lost(),
        ledger.duplicates,
        ledger.rescued_jobs,
        elapsed.as_secs_f64()
    );
    assert!(kills >= 3, "the loop must kill workers mid-run: {kills} kills");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_loop_of_single_attempt_jobs_completes_each_once_on_postgres() {
    let db = TestDatabase::new().await.expect("test database");
    let driver = db.pool(4).expect("pool").into_driver();
    kill_loop(db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_loop_of_single_attempt_jobs_completes_each_once_on_sqlite() {
    let db = SqliteTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    kill_loop(&db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_loop_of_single_attempt_jobs_completes_each_once_on_mysql_or_mariadb() {
    let db = MysqlTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    kill_loop(db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_workers_mid_batch_loses_nothing_and_runs_nothing_twice() {
    let db = TestDatabase::new().await.expect("test database");
    let driver = db.pool(4).expect("pool").into_driver();
    kill_workers_again_and_again(db.url(), driver, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_workers_sharing_a_sqlite_file_loses_nothing_and_runs_nothing_twice() {
    let db = SqliteTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    kill_workers_again_and_again(&db.url(), driver, None).await;
}

/// On a private MariaDB server (it is restarted halfway), never on `MYSQL_URL`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_workers_and_restarting_mysql_or_mariadb_loses_nothing_and_runs_nothing_twice() {
    let server = tokio::task::spawn_blocking(LocalServer::start_private)
        .await
        .expect("start task")
        .expect("private MariaDB server");
    let db = MysqlTestDatabase::on(&MysqlServer::new(server.url("mysql"))).await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    let restart = || tokio::task::block_in_place(|| server.restart()).expect("restart MariaDB");
    kill_workers_again_and_again(db.url(), driver, Some(&restart)).await;
}
