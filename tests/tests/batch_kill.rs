//! A batch of 10,000 members (`JOBS_BATCH_MEMBERS`), filled in adds of 1,000 while three
//! worker processes already run its members, one of them killed with SIGKILL while it
//! holds members and another started in its place, then sealed: the callback runs once,
//! after every member, and reads that all 10,000 completed; every member ran once at its
//! attempt, nothing is left running. On Postgres, on SQLite (three processes on one
//! file), and on MariaDB (or MySQL, with `JOBS_MYSQL_BIN`).

use std::sync::Arc;
use std::time::Duration;

use jobs_core::driver::{Driver, JobDependenciesParams, JobGetParams};
use jobs_core::testing::{MysqlTestDatabase, SqliteTestDatabase, TestDatabase};
use jobs_core::{Batch, IntoDriver, JobState};
use jobs_tests::any_db::{AnyDb, RUNS_TABLE};
use jobs_tests::fault_jobs::{BatchDone, Step, batch_done, once};
use jobs_tests::faults::{JobLedger, held_by};
use jobs_tests::processes::{WorkerProcess, assert_no_panic, log_dir, stop_all};
use jobs_tests::wait_for;

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");

async fn a_batch_calls_back_once_through_a_kill(url: &str, driver: Arc<dyn Driver>) {
    let members: usize =
        std::env::var("JOBS_BATCH_MEMBERS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    AnyDb::of(&*driver).execute(RUNS_TABLE).await.expect("runs table");
    let callback = batch_done::build(BatchDone { members: members as u64 });
    let batch = Batch::new("kill", callback).enqueue(&driver).await.expect("open the batch");

    let logs = log_dir();
    let mut next = 0;
    let mut start = || {
        next += 1;
        WorkerProcess::start(BINARY, url, &format!("batch-{next}"), 20, &logs)
    };
    let mut workers: Vec<WorkerProcess> = (0..3).map(|_| start()).collect();
    let mut killed = false;
    for (i, chunk) in (0..members).collect::<Vec<_>>().chunks(1_000).enumerate() {
        let jobs = chunk.iter().map(|i| once::build(Step { work_ms: 2 + (*i as u64 % 4) }));
        batch.id.add(&driver, jobs).await.expect("add members");
        if i == 2 {
            // A worker dies holding members; another takes its place.
            let victim = workers.remove(0);
            let node = victim.node.clone();
            wait_for(&format!("{node} to hold members"), Duration::from_secs(60), || async {
                (held_by(&*driver, &node).await? > 0).then_some(())
            })
            .await;
            assert_no_panic(&node, &victim.kill9().await);
            killed = true;
            workers.push(start());
        }
    }
    assert!(killed, "the test must kill a worker mid-batch");
    let get = JobGetParams { id: batch.callback_id };
    assert_eq!(driver.job_get(get).await.expect("get").map(|j| j.state), Some(JobState::Pending));
    batch.id.seal(&driver).await.expect("seal");
    let callback = wait_for("the callback to complete", Duration::from_secs(300), || async {
        driver.job_get(get).await.ok().flatten().filter(|j| j.state == JobState::Completed)
    })
    .await;
    let ledger = JobLedger::read(driver.clone(), members as i64 + 1).await;
    stop_all(workers).await;
    ledger.assert_exactly_once();
    assert!(callback.errors.as_array().is_none_or(Vec::is_empty), "the callback failed: {}", callback.errors);
    let edges =
        driver.job_dependencies(JobDependenciesParams { job_id: batch.callback_id }).await.expect("edges");
    assert_eq!(edges.len(), members);
    assert!(edges.iter().all(|e| e.outcome == Some(JobState::Completed)));
    println!(
        "batch kill ({}): {members} members, callback once; {} members rescued",
        driver.name(),
        ledger.rescued_jobs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_ten_thousand_calls_back_once_through_a_kill_on_postgres() {
    let db = TestDatabase::new().await.expect("test database");
    let driver = db.pool(4).expect("pool").into_driver();
    a_batch_calls_back_once_through_a_kill(db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_ten_thousand_calls_back_once_through_a_kill_on_sqlite() {
    let db = SqliteTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    a_batch_calls_back_once_through_a_kill(&db.url(), driver).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_ten_thousand_calls_back_once_through_a_kill_on_mysql_or_mariadb() {
    let db = MysqlTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    a_batch_calls_back_once_through_a_kill(db.url(), driver).await;
}
