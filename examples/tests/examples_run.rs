//! The examples run with one command each and do what their headers say: run as real
//! processes, on the throwaway Postgres they start themselves.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use diesel::prelude::*;
use diesel::sql_types::BigInt;

const DEADLINE: Duration = Duration::from_secs(90);

/// A running example whose stdout lines arrive on a channel.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(binary: &str, env: &[(&str, &str)]) -> Running {
        let mut command = Command::new(binary);
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("SHOP_BIND", "127.0.0.1:0")
            .env("RUST_BACKTRACE", "0");
        for (k, v) in env {
            command.env(k, v);
        }
        if !env.iter().any(|(k, _)| *k == "DATABASE_URL") {
            command.env_remove("DATABASE_URL");
        }
        let mut child = command.spawn().expect("start example");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines, seen: Vec::new() }
    }

    /// Waits for a line containing `needle`; returns it.
    fn line_with(&mut self, needle: &str) -> String {
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("no line with {needle:?}; output so far:\n{}", self.seen.join("\n"));
    }

    /// Sends `signal`, waits for the exit, and returns whether it was clean.
    fn stop(mut self, signal: nix::sys::signal::Signal, expect: &str) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        nix::sys::signal::kill(pid, signal).expect("signal");
        self.line_with(expect);
        let status = self.child.wait().expect("wait");
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

fn count(url: &str, sql: &str) -> i64 {
    let mut conn = PgConnection::establish(url).expect("connect");
    diesel::sql_query(sql).get_result::<N>(&mut conn).map(|r| r.n).unwrap_or(-1)
}

fn wait_count(url: &str, sql: &str, at_least: i64) {
    let start = Instant::now();
    while count(url, sql) < at_least {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {sql} >= {at_least}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn post(address: &str, path: &str, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

const FULFILLED: &str =
    "SELECT count(*) AS n FROM jobs WHERE kind = 'shop.fulfil_order' AND state = 'completed' AND attempt = 3";

#[test]
fn the_demo_shop_signs_up_in_one_transaction_runs_its_jobs_and_stops_cleanly() {
    let mut shop = Running::start(env!("CARGO_BIN_EXE_shop"), &[]);
    let url = database_url(&shop.line_with("DATABASE_URL="));
    let dashboard = shop.line_with("dashboard: http://");
    let address = dashboard.trim_start_matches("dashboard: http://").trim_end_matches("/jobs/").to_owned();

    let response = post(&address, "/signup", "email=grace%40example.com");
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    // A duplicate e-mail fails the insert: no second welcome mail either.
    let response = post(&address, "/signup", "email=grace%40example.com");
    assert!(response.starts_with("HTTP/1.1 422"), "{response}");
    wait_count(
        &url,
        "SELECT count(*) AS n FROM jobs WHERE args->>'email' = 'grace@example.com' AND state = 'completed'",
        1,
    );
    assert_eq!(count(&url, "SELECT count(*) AS n FROM jobs WHERE args->>'email' = 'grace@example.com'"), 1);
    // Each sample order's fulfilment fails twice, then succeeds on the third attempt.
    wait_count(&url, FULFILLED, 2);
    // Both cron schedules are declared, active, with their next run computed.
    assert_eq!(
        count(
            &url,
            "SELECT count(*) AS n FROM job_schedules WHERE active AND next_run_at IS NOT NULL \
                     AND kind IN ('shop.expire_carts', 'shop.nightly_digest')"
        ),
        2
    );
    assert_eq!(
        count(
            &url,
            "SELECT count(*) AS n FROM jobs WHERE state = 'scheduled' AND kind = 'shop.send_welcome'"
        ),
        1
    );
    shop.stop(nix::sys::signal::Signal::SIGINT, "worker stopped cleanly");
}

#[test]
fn a_separate_worker_binary_runs_the_shops_jobs() {
    let mut shop = Running::start(env!("CARGO_BIN_EXE_shop"), &[("SHOP_WORKER", "off")]);
    let url = database_url(&shop.line_with("DATABASE_URL="));
    shop.line_with("dashboard: http://");
    assert_eq!(
        count(&url, "SELECT count(*) AS n FROM jobs WHERE state = 'completed'"),
        0,
        "nothing runs in the app"
    );
    let mut worker = Running::start(env!("CARGO_BIN_EXE_shop-worker"), &[("DATABASE_URL", &url)]);
    worker.line_with("running the shop's queues");
    wait_count(&url, FULFILLED, 2);
    wait_count(
        &url,
        "SELECT count(*) AS n FROM jobs WHERE kind = 'shop.send_welcome' AND state = 'completed'",
        18,
    );
    worker.stop(nix::sys::signal::Signal::SIGTERM, "shop-worker stopped cleanly");
    shop.stop(nix::sys::signal::Signal::SIGINT, "stopping");
}

#[test]
fn sync_enqueue_commits_or_rolls_back_with_the_transaction() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_sync-enqueue")).env_remove("DATABASE_URL").output().expect("run");
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
