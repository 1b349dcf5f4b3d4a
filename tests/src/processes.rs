//! Worker processes for the fault-injection tests: start the `fault_worker` binary, kill
//! it with SIGKILL, stop it with SIGTERM, read its memory, and check its log for panics.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::{Child, Command};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A running `fault_worker` process.
#[derive(Debug)]
pub struct WorkerProcess {
    /// The node name it runs as.
    pub node: String,
    child: Child,
    log: PathBuf,
}

impl WorkerProcess {
    /// Starts `binary` (the test's `CARGO_BIN_EXE_fault_worker`) on `url` as `node`, its
    /// stdout and stderr going to a log file in `dir`.
    pub fn start(binary: &str, url: &str, node: &str, concurrency: usize, dir: &Path) -> WorkerProcess {
        WorkerProcess::start_with(binary, url, node, concurrency, dir, &[])
    }

    /// [`start`](Self::start) with more arguments for the binary.
    pub fn start_with(
        binary: &str,
        url: &str,
        node: &str,
        concurrency: usize,
        dir: &Path,
        extra: &[&str],
    ) -> WorkerProcess {
        let log = dir.join(format!("{node}.log"));
        let out = File::create(&log).expect("create worker log");
        let err = out.try_clone().expect("clone worker log");
        let child = Command::new(binary)
            .args(["--url", url, "--node", node, "--concurrency", &concurrency.to_string()])
            .args(extra)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("start fault_worker");
        WorkerProcess { node: node.to_owned(), child, log }
    }

    /// SIGKILL: the process dies at once, whatever it was doing. Returns its log.
    pub async fn kill9(mut self) -> String {
        self.child.kill().await.expect("SIGKILL");
        self.log_text()
    }

    /// SIGTERM, then waits (up to `deadline`) for the graceful shutdown to finish.
    /// Returns the exit status and the log.
    pub async fn terminate(mut self, deadline: Duration) -> (ExitStatus, String) {
        let pid = self.child.id().and_then(|p| i32::try_from(p).ok()).expect("a running process");
        kill(Pid::from_raw(pid), Signal::SIGTERM).expect("SIGTERM");
        match tokio::time::timeout(deadline, self.child.wait()).await {
            Ok(status) => (status.expect("wait"), self.log_text()),
            Err(_) => panic!("worker {} did not stop within {deadline:?}", self.node),
        }
    }

    /// Sends `signal` (SIGSTOP freezes the process, SIGCONT resumes it).
    pub fn signal(&self, signal: Signal) {
        let pid = self.child.id().and_then(|p| i32::try_from(p).ok()).expect("a running process");
        kill(Pid::from_raw(pid), signal).expect("signal the worker");
    }

    /// Waits (up to `deadline`) for the process to exit by itself; its exit status.
    pub async fn wait(&mut self, deadline: Duration) -> ExitStatus {
        match tokio::time::timeout(deadline, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!("worker {} did not exit within {deadline:?}", self.node),
        }
    }

    /// Whether the process is still alive.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Resident memory in KiB, from `/proc`.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Everything the process wrote so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Stops every worker with SIGTERM and fails the test unless each shut down cleanly
/// (exit 0, no panic in its log). Returns the logs.
pub async fn stop_all(workers: Vec<WorkerProcess>) -> Vec<String> {
    let mut logs = Vec::with_capacity(workers.len());
    for mut worker in workers {
        let node = worker.node.clone();
        assert!(worker.is_alive(), "worker {node} died");
        let (status, log) = worker.terminate(Duration::from_secs(30)).await;
        assert!(status.success(), "worker {node} exited with {status}:\n{log}");
        assert_no_panic(&node, &log);
        logs.push(log);
    }
    logs
}

/// Fails the test if a worker log shows a panic.
pub fn assert_no_panic(node: &str, log: &str) {
    assert!(!log.contains("panicked"), "worker {node} panicked:\n{log}");
}

/// A fresh directory for worker logs, removed when the test passes (kept when it fails,
/// for its logs).
pub fn log_dir() -> LogDir {
    let dir = std::env::temp_dir().join(format!(
        "jobs-faults-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("log dir");
    LogDir(dir)
}

/// A test's directory of worker logs (see [`log_dir`]).
pub struct LogDir(PathBuf);

impl std::ops::Deref for LogDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for LogDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for LogDir {
    /// Removes the logs of a test that passed; a failing test's stay for reading.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
