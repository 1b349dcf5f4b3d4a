//! Recovery under churn, on Postgres, MariaDB/MySQL and SQLite (several processes on one
//! file): 4 worker processes with the library's default timings on one queue with a
//! backlog; every 5 s a random one (the leader included) is killed with SIGKILL and a new
//! one started; the database server (not SQLite's file) is restarted once. Measured: how
//! soon an interrupted job starts again after its worker died (a killed process's liveness
//! lock is free at once: bounded at p50 3 s, worst 6 s), the longest stretch with no live
//! leader (less the seconds the database itself was down: no node can lead then), and
//! what is left at the end (nothing lost, nothing run twice, nothing running, only live
//! nodes registered once the cleanup period has passed). The backends' runs take turns,
//! so that one's processes do not slow another's.
//!
//! CI runs 30 s of churn per backend. The full runs, whose figures `docs/reliability.md`
//! records:
//!
//!     JOBS_CHURN_SECS=300 cargo test --release -p jobs-tests --test churn -- --nocapture

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobs_core::driver::{Driver, JobFilter, JobListParams, LeaderGetParams, NodeListParams};
use jobs_core::mysql::testing::{LocalServer, Server as MysqlServer};
use jobs_core::testing::cluster::TEST_SETTINGS;
use jobs_core::testing::{MysqlTestDatabase, PgCluster, Server, SqliteTestDatabase, TestDatabase};
use jobs_core::{IntoDriver, JobState, enqueue_many};
use jobs_tests::any_db::{AnyDb, RUNS_TABLE};
use jobs_tests::fault_jobs::{Step, step};
use jobs_tests::faults::{JobLedger, try_count_states};
use jobs_tests::processes::{WorkerProcess, assert_no_panic, log_dir, stop_all};
use jobs_tests::wait_for;
use rand::Rng;

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");
const WORKERS: usize = 4;
const KILL_EVERY: Duration = Duration::from_secs(5);
/// Short enough that the test sees dead nodes forgotten; the default is 5 minutes.
const FORGET_NODES_AFTER_SECS: u64 = 20;

/// A kill: the victim, when (ms), and the jobs it held then (id, attempt).
type Kill = (String, i64, Vec<(i64, i32)>);

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The running jobs `node` holds: (id, attempt).
async fn held_by(driver: &dyn Driver, node: &str) -> Vec<(i64, i32)> {
    let filter = JobFilter { states: vec![JobState::Running], ..JobFilter::default() };
    let running = driver
        .job_list(JobListParams { filter: &filter, before: None, limit: 100_000 })
        .await
        .unwrap_or_default();
    running
        .iter()
        .filter(|j| j.attempted_by.last().is_some_and(|n| n == node))
        .map(|j| (j.id, j.attempt))
        .collect()
}

/// Keeps at least 300 jobs waiting. Returns how many it added.
async fn top_up(driver: &Arc<dyn Driver>) -> usize {
    let waiting =
        try_count_states(&**driver, &[JobState::Available, JobState::Retryable, JobState::Scheduled])
            .await
            .unwrap_or(i64::MAX);
    if waiting >= 300 {
        return 0;
    }
    let batch = 500;
    let jobs = (0..batch).map(|i| step::build(Step { work_ms: 200 + (i as u64 % 5) * 100 }));
    if enqueue_many(driver, jobs).await.is_ok() { batch } else { 0 }
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted.get(((sorted.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(0)
}

/// One backend's run at a time.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A restart of the database server (blocking), when it has one.
type Restart = Option<Arc<dyn Fn() + Send + Sync>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_and_a_database_restart_recover_within_the_bounds_on_postgres() {
    let _turn = TURN.lock().await;
    let cluster = tokio::task::spawn_blocking(|| PgCluster::start_private(TEST_SETTINGS))
        .await
        .expect("start task")
        .expect("private cluster");
    let cluster = Arc::new(cluster);
    let db = TestDatabase::on(Server::new(cluster.admin_url())).await.expect("test database");
    let driver = db.pool(4).expect("pool").into_driver();
    let restart: Restart = Some(Arc::new(move || cluster.restart().expect("pg_ctl restart")));
    churn(db.url(), driver, restart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_and_a_database_restart_recover_within_the_bounds_on_mysql_or_mariadb() {
    let _turn = TURN.lock().await;
    let server = tokio::task::spawn_blocking(LocalServer::start_private)
        .await
        .expect("start task")
        .expect("private server");
    let server = Arc::new(server);
    let db = MysqlTestDatabase::on(&MysqlServer::new(server.url("mysql"))).await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    let restart: Restart = Some(Arc::new(move || server.restart().expect("restart the server")));
    churn(db.url(), driver, restart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_workers_sharing_a_sqlite_file_recover_within_the_bounds() {
    let _turn = TURN.lock().await;
    let db = SqliteTestDatabase::new().await.expect("test database");
    let driver = db.driver(4).expect("driver").into_driver();
    churn(&db.url(), driver, None).await;
}

async fn churn(url: &str, driver: Arc<dyn Driver>, restart: Restart) {
    let seconds: u64 = std::env::var("JOBS_CHURN_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    AnyDb::of(&*driver).execute(RUNS_TABLE).await.expect("runs table");
    let mut enqueued = top_up(&driver).await;

    let logs = log_dir();
    let forget = FORGET_NODES_AFTER_SECS.to_string();
    let extra = ["--defaults", "--forget-nodes-after-secs", forget.as_str()];
    let mut next = 0;
    let start = |next: &mut usize| {
        *next += 1;
        WorkerProcess::start_with(BINARY, url, &format!("churn-{next}"), 10, &logs, &extra)
    };
    let mut workers: Vec<WorkerProcess> = (0..WORKERS).map(|_| start(&mut next)).collect();

    let mut kills: Vec<Kill> = Vec::new();
    // Leader samples: (time, holder) every 100 ms.
    let mut samples: Vec<(i64, Option<String>)> = Vec::new();
    let started = Instant::now();
    let started_ms = now_ms();
    let mut last_kill = Instant::now();
    let mut restarted_database = false;
    // When the database was down (ms): no node can lead then, so that time is not charged
    // to the election.
    let mut database_down = (0i64, 0i64);
    let mut rng = rand::rng();
    while started.elapsed() < Duration::from_secs(seconds) {
        let holder = driver.leader_get(LeaderGetParams { name: "default", now: None }).await.unwrap_or(None);
        samples.push((now_ms(), holder));
        if last_kill.elapsed() >= KILL_EVERY {
            last_kill = Instant::now();
            enqueued += top_up(&driver).await;
            let victim = workers.remove(rng.random_range(0..workers.len()));
            let held = held_by(&*driver, &victim.node).await;
            let node = victim.node.clone();
            let at = now_ms();
            assert_no_panic(&node, &victim.kill9().await);
            kills.push((node, at, held));
            workers.push(start(&mut next));
        }
        if let Some(restart) = restart.clone().filter(|_| !restarted_database)
            && started.elapsed() >= Duration::from_secs(seconds / 2)
        {
            restarted_database = true;
            let down = now_ms();
            tokio::task::spawn_blocking(move || restart()).await.expect("restart task");
            database_down = (down, now_ms());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ledger = JobLedger::wait_all_completed(driver.clone(), enqueued, Duration::from_secs(300)).await;
    let runs = AnyDb::of(&*driver).runs().await.expect("runs");
    let started_at: HashMap<(i64, i32), i64> =
        runs.iter().map(|r| ((r.job_id, r.attempt), r.at_ms)).collect();
    // How long after its worker died each interrupted job started again.
    let mut restarts: Vec<i64> = Vec::new();
    for (_, at, held) in &kills {
        for (id, attempt) in held {
            if let Some(next) = started_at.get(&(*id, attempt + 1)) {
                restarts.push(next - at);
            }
        }
    }
    restarts.sort_unstable();
    // The longest stretch in which the lease was free or held by a killed node, less the
    // time the database itself was down, and when it began.
    let killed_at: HashMap<&str, i64> = kills.iter().map(|(n, at, _)| (n.as_str(), *at)).collect();
    let overlap_with_down = |from: i64, to: i64| (to.min(database_down.1) - from.max(database_down.0)).max(0);
    let (mut longest, mut longest_from, mut since) = (0i64, 0i64, None::<i64>);
    for (at, holder) in &samples {
        let dead = holder.as_deref().is_none_or(|h| killed_at.get(h).is_some_and(|k| k <= at));
        match (dead, since) {
            (true, None) => since = Some(*at),
            (false, Some(from)) => {
                let stretch = at - from - overlap_with_down(from, *at);
                if stretch > longest {
                    (longest, longest_from) = (stretch, from);
                }
                since = None;
            }
            _ => {}
        }
    }
    if let (Some(from), Some((last, _))) = (since, samples.last()) {
        let stretch = last - from - overlap_with_down(from, *last);
        if stretch > longest {
            (longest, longest_from) = (stretch, from);
        }
    }
    let begun = |at: i64| (at - started_ms) as f64 / 1000.0;
    let kill_times: Vec<String> = kills.iter().map(|(_, at, _)| format!("{:.1}", begun(*at))).collect();
    // Dead nodes are forgotten after the cleanup period; the live ones stay.
    let live: Vec<String> = workers.iter().map(|w| w.node.clone()).collect();
    let nodes =
        wait_for("dead nodes to be forgotten", Duration::from_secs(FORGET_NODES_AFTER_SECS + 30), || async {
            let mut names: Vec<String> =
                driver.node_list(NodeListParams {}).await.ok()?.into_iter().map(|n| n.name).collect();
            names.sort();
            let mut expected = live.clone();
            expected.sort();
            (names == expected).then_some(names)
        })
        .await;
    stop_all(workers).await;
    ledger.assert_exactly_once();
    let (p50, worst) = (percentile(&restarts, 0.5), restarts.last().copied().unwrap_or(0));
    let outage = if restarted_database {
        format!("database down {:.1}..{:.1} s, not counted", begun(database_down.0), begun(database_down.1))
    } else {
        "no database restart".to_owned()
    };
    println!(
        "churn ({}): {seconds} s, {} kills, {} database restart, {} jobs; interrupted jobs restarted after p50 {:.1} s, \
         worst {:.1} s ({} jobs); longest stretch without a live leader {:.1} s (from {:.1} s; kills at {} s; {outage}); {} lost, {} run twice at one \
         attempt, {} left running; {} node rows at the end ({} live)",
        driver.name(),
        kills.len(),
        u8::from(restarted_database),
        ledger.enqueued,
        p50 as f64 / 1000.0,
        worst as f64 / 1000.0,
        restarts.len(),
        longest as f64 / 1000.0,
        begun(longest_from),
        kill_times.join(", "),
        ledger.lost(),
        ledger.duplicates,
        ledger.running,
        nodes.len(),
        live.len(),
    );
    assert!(!restarts.is_empty(), "kills must interrupt jobs");
    assert!(p50 <= 3_000, "p50 restart {p50} ms > 3 s");
    assert!(worst <= 6_000, "worst restart {worst} ms > 6 s");
    if longest > 8_000 {
        // Which node led when, from the workers' own logs.
        let mut changes: Vec<String> = std::fs::read_dir(&logs)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
            .flat_map(|log| {
                log.lines()
                    .filter(|l| l.contains("leadership changed"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        changes.sort();
        panic!(
            "{longest} ms without a live leader > 8 s (from {:.1} s; started at {}):\n{}",
            begun(longest_from),
            chrono::DateTime::from_timestamp_millis(started_ms).map(|t| t.to_rfc3339()).unwrap_or_default(),
            changes.join("\n")
        );
    }
}
