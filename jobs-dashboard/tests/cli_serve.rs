//! `jobs-dashboard serve`, run as a real process against a real Postgres: its address, its
//! pages, and a clean stop on SIGTERM.

use std::process::Command;

use jobs_core::testing::TestDatabase;

const BINARY: &str = env!("CARGO_BIN_EXE_jobs-dashboard");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_its_address_serves_the_dashboard_and_stops_on_sigterm() {
    use std::io::{BufRead, BufReader, Read, Write};
    let db = TestDatabase::new().await.expect("db");
    let mut child = Command::new(BINARY)
        .env_remove("DATABASE_URL")
        .args([
            "--database-url",
            db.url(),
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--mount",
            "/ops/jobs",
            "--read-only",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map(KillOnDrop)
        .expect("serve");
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().expect("stdout")).read_line(&mut line).expect("address line");
    let url = line.trim().strip_prefix("jobs dashboard on http://").expect("address").to_owned();
    let (addr, path) = url.split_once('/').expect("a path");
    assert_eq!(path, "ops/jobs/");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    write!(stream, "GET /{path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    // SIGTERM (a container's stop) ends it cleanly: exit status 0, within its 5 s.
    let signalled = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().expect("kill");
    assert!(signalled.success());
    let status = jobs_core::testing::wait_for(
        "serve to exit after SIGTERM",
        std::time::Duration::from_secs(10),
        || {
            let exited = child.0.try_wait().expect("wait");
            async move { exited }
        },
    )
    .await;
    assert!(status.success(), "exit status after SIGTERM: {status}");
    assert!(response.starts_with("HTTP/1.1 200"), "{}", &response[..response.len().min(200)]);
    assert!(response.contains("<h1>Overview</h1>"));
    assert!(response.contains(r#"id="read-only""#), "served read-only");
}

/// A child process that a failing test does not leave running.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
