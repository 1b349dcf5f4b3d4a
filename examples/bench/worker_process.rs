//! A burn-down's worker processes: both sides of the line protocol between the benchmark
//! and each `bench worker-process` it starts.
//!
//! The child prints `ready` once its worker listens, `done <n>` as its jobs finish (at most
//! every 2 ms), and on `stop` (or the end of its input) prints `claims <n>`, shuts its
//! worker down and exits.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jobs_core::{QueueConfig, Worker};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;

use crate::jobs::{DONE, registry};
use crate::measure::{BenchResult, cpu_seconds_of};

/// How the parent configures a worker process.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct WorkerArgs {
    /// Slots of the `bench` queue.
    #[arg(long)]
    pub(crate) concurrency: usize,
    /// Claim statements in flight.
    #[arg(long, default_value_t = 1)]
    pub(crate) claims_in_flight: usize,
    /// The most jobs one claim asks for (the worker's `max_fetch`).
    #[arg(long, default_value_t = 1_000)]
    pub(crate) max_fetch: usize,
    /// The worker's prefetch window, ms (0: no buffer).
    #[arg(long, default_value_t = 20)]
    pub(crate) prefetch_window_ms: u64,
    /// The queue's prefetch cap (default: the framework's).
    #[arg(long)]
    pub(crate) prefetch: Option<usize>,
    /// Delete jobs when they complete instead of keeping them.
    #[arg(long)]
    pub(crate) delete_on_completion: bool,
    /// Serve this many queues (`bench`, `bench-1`, ...), the slots split between them.
    #[arg(long, default_value_t = 1)]
    pub(crate) queues: usize,
    /// The worker's node name.
    #[arg(long)]
    pub(crate) node: String,
    /// How long each job takes, ms.
    #[arg(long, default_value_t = 0)]
    pub(crate) job_ms: u64,
}

/// The child's side: runs a worker on the `bench` queue until told to stop.
pub(crate) async fn run(args: WorkerArgs) -> BenchResult {
    let url = std::env::var("DATABASE_URL")?;
    crate::jobs::JOB_MS.store(args.job_ms, std::sync::atomic::Ordering::Relaxed);
    let names = crate::burndown::queue_names(args.queues);
    let slots = args.concurrency.div_ceil(names.len()).max(1);
    let mut builder = Worker::builder(jobs_core::driver_for_url(&url, 8)?);
    for name in &names {
        let mut queue = QueueConfig::new(name, slots);
        if args.delete_on_completion {
            queue = queue.delete_on_completion();
        }
        if let Some(n) = args.prefetch {
            queue = queue.prefetch(n);
        }
        builder = builder.queue_config(queue);
    }
    if names.len() > 1 {
        // bench.noop is registered for `bench`; the others get it by a per-call queue.
        builder = builder.allow_queues_without_jobs();
    }
    let worker = builder
        .registry(registry()?)
        .node_name(args.node)
        .claims_in_flight(args.claims_in_flight)
        .max_fetch(args.max_fetch)
        .prefetch_window(Duration::from_millis(args.prefetch_window_ms))
        .build()?
        .start()
        .await?;
    while !worker.is_listening() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    println!("ready");
    let reporter = tokio::spawn(async {
        let mut last = 0;
        let mut tick = tokio::time::interval(Duration::from_millis(2));
        loop {
            tick.tick().await;
            let done = DONE.load(Ordering::Relaxed);
            if done != last {
                println!("done {done}");
                last = done;
            }
        }
    });
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = input.next_line().await? {
        if line == "stop" {
            break;
        }
    }
    reporter.abort();
    println!("done {}", DONE.load(Ordering::Relaxed));
    println!("claims {}", names.iter().map(|q| worker.fetch_count(q)).sum::<u64>());
    worker.shutdown().await?;
    Ok(())
}

/// The parent's handle on one worker process.
pub(crate) struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    pid: String,
    done: Arc<AtomicU64>,
    claims: Arc<AtomicU64>,
    ready: watch::Receiver<bool>,
    reader: tokio::task::JoinHandle<()>,
}

impl WorkerProcess {
    /// Starts `bench worker-process` with `args` against `database_url`.
    pub(crate) fn start(database_url: &str, args: &WorkerArgs) -> BenchResult<WorkerProcess> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg("worker-process")
            .args(["--concurrency", &args.concurrency.to_string()])
            .args(["--claims-in-flight", &args.claims_in_flight.to_string()])
            .args(["--max-fetch", &args.max_fetch.to_string()])
            .args(["--prefetch-window-ms", &args.prefetch_window_ms.to_string()]);
        if let Some(n) = args.prefetch {
            command.args(["--prefetch", &n.to_string()]);
        }
        command
            .args(["--queues", &args.queues.to_string()])
            .args(["--node", &args.node])
            .args(["--job-ms", &args.job_ms.to_string()])
            .env("DATABASE_URL", database_url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if args.delete_on_completion {
            command.arg("--delete-on-completion");
        }
        let mut child = command.spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let pid = child.id().ok_or("no pid")?.to_string();
        let (done, claims) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (ready_tx, ready) = watch::channel(false);
        let reader = {
            let (done, claims) = (done.clone(), claims.clone());
            tokio::spawn(async move {
                let mut lines = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let (what, n) = line.split_once(' ').unwrap_or((line.as_str(), "0"));
                    let n = n.parse().unwrap_or(0);
                    match what {
                        "ready" => drop(ready_tx.send(true)),
                        "done" => done.store(n, Ordering::Relaxed),
                        "claims" => claims.store(n, Ordering::Relaxed),
                        _ => eprintln!("worker process: {line}"),
                    }
                }
            })
        };
        Ok(WorkerProcess { child, stdin, pid, done, claims, ready, reader })
    }

    /// Waits until its worker listens.
    pub(crate) async fn ready(&mut self) -> BenchResult {
        self.ready
            .wait_for(|ready| *ready)
            .await
            .map_err(|_| "a worker process exited before it was ready")?;
        Ok(())
    }

    /// Jobs it has finished.
    pub(crate) fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// CPU seconds it has used.
    pub(crate) fn cpu_seconds(&self) -> f64 {
        cpu_seconds_of(&self.pid)
    }

    /// Stops it and returns how many claim statements it issued.
    pub(crate) async fn stop(mut self) -> BenchResult<u64> {
        self.stdin.write_all(b"stop\n").await?;
        self.stdin.flush().await?;
        let status = self.child.wait().await?;
        self.reader.await?;
        if !status.success() {
            return Err(format!("a worker process exited with {status}").into());
        }
        Ok(self.claims.load(Ordering::Relaxed))
    }
}
