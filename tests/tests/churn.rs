//! Recovery under churn, on Postgres, MariaDB/MySQL and SQLite (several processes on one
//! file): 4 worker processes with the library's default timings on one queue with a
//! backlog; every 5 s a random one (the leader included) is killed with SIGKILL and a new
//! one started; the database server (not SQLite's file) is restarted once, down for 2 s,
//! at a random point between two kills (`JOBS_CHURN_RESTART_AFTER_KILL_MS` replays one):
//! just after a kill, or just before one, so that a node dies while the nodes take their
//! liveness locks again. Measured: how soon an interrupted job starts again after its
//! worker died (a killed process's liveness lock is free at once: bounded at p50 3 s,
//! worst 6 s), the longest stretch with no live leader (both less the seconds the database
//! itself was down, and the 3 s after, while a free liveness lock is not yet read as a
//! dead node: the restart freed them all), and what is left at the
//! end (nothing lost, nothing run twice at one attempt, nothing running, only live nodes
//! registered once the cleanup period has passed). A run is recorded under a number of
//! its own, so that a record written again after the restart lost its reply is not taken
//! for a second run. The backends' runs take turns, so that one's processes do not slow
//! another's.
//!
//! CI runs 30 s of churn per backend. The full runs, whose figures `docs/reliability.md`
//! records:
//!
//!     JOBS_CHURN_SECS=300 cargo test --release -p jobs-tests --test churn -- --nocapture

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobs_core::driver::{Driver, JobFilter, JobListParams, LeaderGetParams, NodeListParams};
use jobs_core::maintenance::RescuerConfig;
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

/// The running jobs `node` holds: (id, attempt). Read until the database answers (right
/// after its restart, the test's own pool may hand out a connection the restart broke): a
/// kill recorded as holding nothing would go unmeasured.
async fn held_by(driver: &dyn Driver, node: &str) -> Vec<(i64, i32)> {
    let filter = JobFilter { states: vec![JobState::Running], ..JobFilter::default() };
    let running = wait_for("the running jobs", Duration::from_secs(30), || async {
        driver.job_list(JobListParams { filter: &filter, before: None, limit: 100_000 }).await.ok()
    })
    .await;
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

/// How long the database server stays down in its restart: a restart that takes a while,
/// as a real one or a failover does (a bare stop and start takes 0.2 s here).
const OUTAGE: Duration = Duration::from_secs(2);

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
    let restart: Restart = Some(Arc::new(move || {
        cluster.stop().expect("pg_ctl stop");
        std::thread::sleep(OUTAGE);
        cluster.start().expect("pg_ctl start");
    }));
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
    let restart: Restart = Some(Arc::new(move || {
        server.stop().expect("stop the server");
        std::thread::sleep(OUTAGE);
        server.start().expect("start the server");
    }));
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
    // Where the restart falls between two kills, at random (a kill just before it, or just
    // after, while the nodes take their liveness locks again, are both paths to hold);
    // `JOBS_CHURN_RESTART_AFTER_KILL_MS` replays a run.
    let restart_after_kill = Duration::from_millis(
        std::env::var("JOBS_CHURN_RESTART_AFTER_KILL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| rng.random_range(0..KILL_EVERY.as_millis() as u64)),
    );
    println!("churn ({}): the database restarts {restart_after_kill:?} after a kill", driver.name());
    // Set at the first kill past half time: when the restart is due.
    let mut restart_due: Option<Instant> = None;
    while started.elapsed() < Duration::from_secs(seconds) {
        let holder = driver.leader_get(LeaderGetParams { name: "default", now: None }).await.unwrap_or(None);
        samples.push((now_ms(), holder));
        // Before the kill: a restart due just before a kill ends with that kill right
        // after the database is back.
        if let Some(restart) = restart.clone().filter(|_| !restarted_database)
            && restart_due.is_some_and(|due| Instant::now() >= due)
        {
            restarted_database = true;
            let down = now_ms();
            tokio::task::spawn_blocking(move || restart()).await.expect("restart task");
            database_down = (down, now_ms());
        }
        if last_kill.elapsed() >= KILL_EVERY {
            last_kill = Instant::now();
            if restart_due.is_none() && started.elapsed() >= Duration::from_secs(seconds / 2) {
                restart_due = Some(last_kill + restart_after_kill);
            }
            enqueued += top_up(&driver).await;
            let victim = workers.remove(rng.random_range(0..workers.len()));
            let held = held_by(&*driver, &victim.node).await;
            let node = victim.node.clone();
            let at = now_ms();
            assert_no_panic(&node, &victim.kill9().await);
            kills.push((node, at, held));
            workers.push(start(&mut next));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(restarted_database, restart.is_some(), "the database restart fell inside the run");
    let ledger = JobLedger::wait_all_completed(driver.clone(), enqueued, Duration::from_secs(300)).await;
    let runs = AnyDb::of(&*driver).runs().await.expect("runs");
    let started_at: HashMap<(i64, i32), i64> =
        runs.iter().map(|r| ((r.job_id, r.attempt), r.at_ms)).collect();
    // The part of a stretch the database was down, and the while after it when a free
    // liveness lock does not yet mean a dead node (the restart freed every node's; the
    // rescuer waits `2 × lock_lost_grace` of answers before it reads them): nothing can be
    // rescued by lock then, so that time is charged neither to the rescue nor to the
    // election.
    let after_restart = (2 * RescuerConfig::default().lock_lost_grace).as_millis() as i64;
    let untrusted = (database_down.0, database_down.1 + if restarted_database { after_restart } else { 0 });
    let overlap_with_down = |from: i64, to: i64| (to.min(untrusted.1) - from.max(untrusted.0)).max(0);
    // How long after its worker died each interrupted job started again (less the outage).
    let mut restarts: Vec<i64> = Vec::new();
    // Per kill: the victim, when, how many jobs it held, the slowest of their restarts.
    let mut per_kill: Vec<(String, i64, usize, i64)> = Vec::new();
    for (node, at, held) in &kills {
        let mut slowest = 0;
        for (id, attempt) in held {
            if let Some(next) = started_at.get(&(*id, attempt + 1)) {
                let after = next - at - overlap_with_down(*at, *next);
                restarts.push(after);
                slowest = slowest.max(after);
            }
        }
        per_kill.push((node.clone(), *at, held.len(), slowest));
    }
    restarts.sort_unstable();
    // The longest stretch in which the lease was free or held by a killed node, less the
    // time the database itself was down, and when it began.
    let killed_at: HashMap<&str, i64> = kills.iter().map(|(n, at, _)| (n.as_str(), *at)).collect();
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
    // Run records written again after a lost reply (the restart closed their connection
    // after the write): the same run, counted once (the record carries its run number).
    let rewritten = std::fs::read_dir(&logs)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .map(|log| log.matches("the run's record was written before").count())
        .sum::<usize>();
    ledger.assert_exactly_once();
    let (p50, worst) = (percentile(&restarts, 0.5), restarts.last().copied().unwrap_or(0));
    let outage = if restarted_database {
        format!(
            "database down {:.1}..{:.1} s, not counted (nor the {:.1} s after it)",
            begun(database_down.0),
            begun(database_down.1),
            after_restart as f64 / 1000.0
        )
    } else {
        "no database restart".to_owned()
    };
    println!(
        "churn ({}): {seconds} s, {} kills, {} database restart, {} jobs; interrupted jobs restarted after p50 {:.1} s, \
         worst {:.1} s ({} jobs); longest stretch without a live leader {:.1} s (from {:.1} s; kills at {} s; {outage}); {} lost, {} run twice at one \
         attempt ({rewritten} run records whose reply was lost), {} left running; {} node rows at the end ({} live)",
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
    let kills_told: Vec<String> = per_kill
        .iter()
        .map(|(node, at, held, slowest)| {
            format!("{node} at {:.1} s: {held} jobs, slowest back after {slowest} ms", begun(*at))
        })
        .collect();
    assert!(worst <= 6_000, "worst restart {worst} ms > 6 s ({outage}):\n{}", kills_told.join("\n"));
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
