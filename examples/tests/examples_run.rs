//! The examples run with one command each and do what their headers say: run as real
//! processes, on the throwaway Postgres they start themselves.

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
        let mut command = Command::new(binary);
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

    /// Waits (up to the deadline) for a line containing `needle`; returns it.
    async fn line_with(&mut self, needle: &str) -> String {
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

/// A count, or `None` while the database cannot answer.
async fn count(url: &str, sql: &str) -> Option<i64> {
    let mut conn = jobs_core::postgres::connect(url).await.ok()?;
    diesel::sql_query(sql).get_result::<N>(&mut conn).await.ok().map(|r| r.n)
}

async fn wait_count(url: &str, sql: &str, at_least: i64) {
    wait_for(&format!("{sql} >= {at_least}"), DEADLINE, || async {
        (count(url, sql).await? >= at_least).then_some(())
    })
    .await;
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

const FULFILLED: &str =
    "SELECT count(*) AS n FROM jobs WHERE kind = 'shop.fulfil_order' AND state = 'completed' AND attempt = 3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shop_signs_up_in_one_transaction_runs_its_jobs_and_stops_cleanly() {
    let mut shop = Running::start(env!("CARGO_BIN_EXE_shop"), &[]);
    let url = database_url(&shop.line_with("DATABASE_URL=").await);
    let dashboard = shop.line_with("dashboard: http://").await;
    let address = dashboard.trim_start_matches("dashboard: http://").trim_end_matches("/jobs/").to_owned();

    let response = post(&address, "/signup", "email=grace%40example.com").await;
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    // A duplicate e-mail fails the insert: no second welcome mail either.
    let response = post(&address, "/signup", "email=grace%40example.com").await;
    assert!(response.starts_with("HTTP/1.1 422"), "{response}");
    wait_count(
        &url,
        "SELECT count(*) AS n FROM jobs WHERE args->>'email' = 'grace@example.com' AND state = 'completed'",
        1,
    )
    .await;
    assert_eq!(
        count(&url, "SELECT count(*) AS n FROM jobs WHERE args->>'email' = 'grace@example.com'").await,
        Some(1)
    );
    // Each sample order's fulfilment fails twice, then succeeds on the third attempt.
    wait_count(&url, FULFILLED, 2).await;
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
            "SELECT count(*) AS n FROM jobs WHERE state = 'scheduled' AND kind = 'shop.send_welcome'"
        )
        .await,
        Some(1)
    );
    shop.stop(nix::sys::signal::Signal::SIGINT, "worker stopped cleanly").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_worker_binary_runs_the_shops_jobs() {
    let mut shop = Running::start(env!("CARGO_BIN_EXE_shop"), &[("SHOP_WORKER", "off")]);
    let url = database_url(&shop.line_with("DATABASE_URL=").await);
    shop.line_with("dashboard: http://").await;
    assert_eq!(
        count(&url, "SELECT count(*) AS n FROM jobs WHERE state = 'completed'").await,
        Some(0),
        "nothing runs in the app"
    );
    let mut worker = Running::start(env!("CARGO_BIN_EXE_shop-worker"), &[("DATABASE_URL", &url)]);
    worker.line_with("running the shop's queues").await;
    wait_count(&url, FULFILLED, 2).await;
    wait_count(
        &url,
        "SELECT count(*) AS n FROM jobs WHERE kind = 'shop.send_welcome' AND state = 'completed'",
        18,
    )
    .await;
    worker.stop(nix::sys::signal::Signal::SIGTERM, "shop-worker stopped cleanly").await;
    shop.stop(nix::sys::signal::Signal::SIGINT, "stopping").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_enqueue_commits_or_rolls_back_with_the_transaction() {
    let output = Command::new(env!("CARGO_BIN_EXE_sync-enqueue"))
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("run");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains(
            "rolled back (invalid option `email`: rejected by a later check): no user row and no job"
        ),
        "{text}"
    );
    assert!(text.contains("jobs waiting: 1"), "{text}");
    assert!(text.contains("ran job 1 (shop.send_welcome): completed"), "{text}");
}
