//! The examples run with one command each and do what their headers say: run as real
//! processes, on the SQLite file or the throwaway Postgres they start themselves.

use std::process::Stdio;
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;
use jobs_core::testing::wait_for;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const DEADLINE: Duration = Duration::from_secs(90);

/// A running example and its stdout, read line by line.
struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Running {
    fn start(binary: &str, env: &[(&str, &str)]) -> Running {
        Running::start_with(binary, &[], env)
    }

    fn start_with(binary: &str, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut command = Command::new(binary);
        command.args(args);
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("SHOP_BIND", "127.0.0.1:0")
            .env("RUST_BACKTRACE", "0")
            .kill_on_drop(true);
        for (k, v) in env {
            command.env(k, v);
        }
        if !env.iter().any(|(k, _)| *k == "DATABASE_URL") {
            command.env_remove("DATABASE_URL");
        }
        let mut child = command.spawn().expect("start example");
        let stdout = child.stdout.take().expect("stdout");
        Running { child, lines: BufReader::new(stdout).lines(), seen: Vec::new() }
    }

    /// Waits (up to the deadline) for a line containing `needle`; returns it (the first
    /// such line, also when it was read already).
    async fn line_with(&mut self, needle: &str) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        let found = tokio::time::timeout(DEADLINE, async {
            while let Ok(Some(line)) = self.lines.next_line().await {
                self.seen.push(line.clone());
                if line.contains(needle) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            _ => panic!("no line with {needle:?}; output so far:\n{}", self.seen.join("\n")),
        }
    }

    /// Sends `signal`, waits for the line `expect` and a clean exit.
    async fn stop(mut self, signal: nix::sys::signal::Signal, expect: &str) {
        let pid = self.child.id().and_then(|p| i32::try_from(p).ok()).expect("a running process");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).expect("signal");
        self.line_with(expect).await;
        let status =
            tokio::time::timeout(DEADLINE, self.child.wait()).await.expect("exit in time").expect("wait");
        assert!(status.success(), "exited with {status}");
    }
}

fn database_url(line: &str) -> String {
    line.split('\'').nth(1).expect("a quoted DATABASE_URL").to_owned()
}

#[derive(QueryableByName)]
struct N {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// A count on the database `url` names (the statements are written in the SQL the
/// backends share), or `None` while the database cannot answer.
async fn count(url: &str, sql: &str) -> Option<i64> {
    if url.starts_with("sqlite:") {
        let mut conn = jobs_core::sqlite::connect(url).await.ok()?;
        return diesel::sql_query(sql).get_result::<N>(&mut conn).await.ok().map(|r| r.n);
    }
    if url.starts_with("mysql:") {
        let mut conn = jobs_core::mysql::connect(url).await.ok()?;
        return diesel::sql_query(sql).get_result::<N>(&mut conn).await.ok().map(|r| r.n);
    }
    let mut conn = jobs_core::postgres::connect(url).await.ok()?;
    diesel::sql_query(sql).get_result::<N>(&mut conn).await.ok().map(|r| r.n)
}

async fn wait_count(url: &str, sql: &str, at_least: i64) {
    wait_for(&format!("{sql} >= {at_least}"), DEADLINE, || async {
        (count(url, sql).await? >= at_least).then_some(())
    })
    .await;
}

async fn get(address: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    response
}

async fn post(address: &str, path: &str, body: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    response
}

const FULFILLED: &str = "SELECT count(*) AS n FROM jobs_all \
     WHERE kind = 'shop.fulfil_order' AND state = 'completed' AND attempt = 3";

const MAILED: &str = "SELECT count(*) AS n FROM jobs_all \
     WHERE kind = 'shop.mail_shipped' AND state = 'completed' AND workflow_id IS NOT NULL";

/// Runs the demo shop (started by the caller) through its paces: a sign-up in one
/// transaction, a rejected duplicate, orders that fail twice, succeed and then mail the
/// customer (a workflow), cron schedules, a scheduled mail; then stops it with `stop`
/// (SIGINT as Ctrl-C, SIGTERM as a container runtime does) and sees the worker drain and
/// the process exit 0.
async fn the_shop_works(mut shop: Running, stop: nix::sys::signal::Signal) {
    let url = database_url(&shop.line_with("DATABASE_URL=").await);
    let dashboard = shop.line_with("dashboard: http://").await;
    let address = dashboard.trim_start_matches("dashboard: http://").trim_end_matches("/jobs/").to_owned();

    let response = post(&address, "/signup", "email=grace%40example.com").await;
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    // A duplicate e-mail fails the insert: no second welcome mail either.
    let response = post(&address, "/signup", "email=grace%40example.com").await;
    assert!(response.starts_with("HTTP/1.1 422"), "{response}");
    // MariaDB spells `args->>'email'` its own way.
    let email = if url.starts_with("mysql:") { "JSON_VALUE(args, '$.email')" } else { "args->>'email'" };
    wait_count(
        &url,
        &format!(
            "SELECT count(*) AS n FROM jobs_all WHERE {email} = 'grace@example.com' AND state = 'completed'"
        ),
        1,
    )
    .await;
    assert_eq!(
        count(&url, &format!("SELECT count(*) AS n FROM jobs_all WHERE {email} = 'grace@example.com'")).await,
        Some(1)
    );
    // Each sample order's fulfilment fails twice, then succeeds on the third attempt; the
    // failed attempts reach the error reporter (a run middleware) with their job.
    wait_count(&url, FULFILLED, 2).await;
    let reported = shop.line_with("failure reported: shop.fulfil_order attempt 2 of 5").await;
    assert!(reported.contains("the warehouse API timed out (attempt 2) (will retry)"), "{reported}");
    // Then each order's shipping mail, the workflow's second step, read the answer (it
    // fails on a dependency without one) and completed.
    wait_count(&url, MAILED, 2).await;
    // Both cron schedules are declared, active, with their next run computed.
    assert_eq!(
        count(
            &url,
            "SELECT count(*) AS n FROM job_schedules WHERE active AND next_run_at IS NOT NULL \
                     AND kind IN ('shop.expire_carts', 'shop.nightly_digest')"
        )
        .await,
        Some(2)
    );
    assert_eq!(
        count(
            &url,
            "SELECT count(*) AS n FROM jobs_all WHERE state = 'scheduled' AND kind = 'shop.send_welcome'"
        )
        .await,
        Some(1)
    );
    // The dashboard serves its pages with the jobs in them.
    let page = get(&address, "/jobs/jobs?state=completed").await;
    assert!(page.starts_with("HTTP/1.1 200") && page.contains("shop.fulfil_order"), "{page}");
    // Prometheus scrapes the engine's metrics, described, with their labels.
    let metrics = get(&address, "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(metrics.contains("# HELP jobs_completed_total Attempts that succeeded."), "{metrics}");
    assert!(metrics.contains("# TYPE jobs_duration_seconds"), "{metrics}");
    let sample = |name: &str, labels: &[&str]| {
        metrics.lines().any(|line| {
            line.starts_with(&format!("{name}{{")) && labels.iter().all(|label| line.contains(label))
        })
    };
    for (name, labels) in [
        ("jobs_completed_total", &["queue=\"billing\"", "kind=\"shop.fulfil_order\""][..]),
        ("jobs_failed_total", &["queue=\"billing\"", "kind=\"shop.fulfil_order\""][..]),
        ("jobs_claimed_total", &["queue=\"mailers\""][..]),
    ] {
        assert!(sample(name, labels), "no {name} with {labels:?} in:\n{metrics}");
    }
    shop.stop(stop, "worker stopped cleanly").await;
}

/// The libraries a running process has mapped.
fn mapped_libraries(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("the process's maps")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shop_runs_on_sqlite_with_no_postgres_anywhere() {
    // No Postgres server binaries to be found, and none on PATH.
    let env = [("JOBS_POSTGRES_BIN", "/nonexistent"), ("PATH", "/usr/bin:/bin")];
    let refused = Command::new(env!("CARGO_BIN_EXE_shop"))
        .arg("--postgres")
        .env_remove("DATABASE_URL")
        .envs(env)
        .output()
        .await
        .expect("run");
    assert!(!refused.status.success(), "--postgres cannot start a server here");
    let mut shop = Running::start(env!("CARGO_BIN_EXE_shop"), &env);
    assert!(shop.line_with("database: ").await.contains("sqlite"));
    let maps = mapped_libraries(shop.child.id().expect("running"));
    assert!(maps.contains("/shop"), "the maps are the demo's own");
    assert!(!maps.contains("libpq"), "the demo links no libpq");
    the_shop_works(shop, nix::sys::signal::Signal::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shop_runs_on_a_throwaway_postgres() {
    let shop = Running::start_with(env!("CARGO_BIN_EXE_shop"), &["--postgres"], &[]);
    the_shop_works(shop, nix::sys::signal::Signal::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shop_runs_on_a_throwaway_mariadb() {
    let mut shop = Running::start_with(env!("CARGO_BIN_EXE_shop"), &["--mariadb"], &[]);
    assert!(shop.line_with("database: ").await.contains("mysql"));
    the_shop_works(shop, nix::sys::signal::Signal::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_worker_binary_runs_the_shops_jobs() {
    let mut shop = Running::start(env!("CARGO_BIN_EXE_shop"), &[("SHOP_WORKER", "off")]);
    let url = database_url(&shop.line_with("DATABASE_URL=").await);
    shop.line_with("dashboard: http://").await;
    assert_eq!(
        count(&url, "SELECT count(*) AS n FROM jobs_all WHERE state = 'completed'").await,
        Some(0),
        "nothing runs in the app"
    );
    let mut worker = Running::start(env!("CARGO_BIN_EXE_shop-worker"), &[("DATABASE_URL", &url)]);
    worker.line_with("running the shop's queues").await;
    wait_count(&url, FULFILLED, 2).await;
    wait_count(
        &url,
        "SELECT count(*) AS n FROM jobs_all WHERE kind = 'shop.send_welcome' AND state = 'completed'",
        18,
    )
    .await;
    worker.stop(nix::sys::signal::Signal::SIGTERM, "shop-worker stopped cleanly").await;
    shop.stop(nix::sys::signal::Signal::SIGINT, "stopping").await;
}
