//! A worker process for the fault-injection tests: runs the `faults` queue of the
//! database at `--url` (`postgres://` or `sqlite://`) until SIGTERM (graceful shutdown,
//! exit 0) or SIGKILL.
//!
//! Timings are short so that a killed node's jobs are rescued within seconds. Logs go to
//! stderr (warnings and up); the tests read them for panics.

use std::time::Duration;

use clap::Parser;
use jobs_core::maintenance::{LeaderConfig, RescuerConfig, SchedulerConfig};
use tokio::signal::unix::{SignalKind, signal};

use jobs_core::{IntoDriver, Registry, Worker};
use jobs_tests::fault_jobs::{batch_done, noop, once, step};

#[derive(Debug, Parser)]
struct Args {
    /// The database.
    #[arg(long)]
    url: String,
    /// This node's name.
    #[arg(long)]
    node: String,
    /// Jobs at once.
    #[arg(long, default_value_t = 20)]
    concurrency: usize,
    /// Run with the library's default timings (heartbeat, leader, rescuer, scheduler), as
    /// a deployment would, instead of the fault tests' short ones.
    #[arg(long)]
    defaults: bool,
    /// Forget nodes silent for this many seconds (the rescuer's `forget_nodes_after`).
    #[arg(long)]
    forget_nodes_after_secs: Option<u64>,
    /// `--url` is a pooler in transaction mode (PgBouncer): `PgDriver::through_pooler`.
    #[arg(long)]
    through_pooler: bool,
    /// With `--through-pooler`: LISTEN on a direct connection to this URL.
    #[arg(long)]
    listen_url: Option<String>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // As an application reports it: the error's own words.
            eprintln!("fault_worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        // Leadership changes too: the churn test reads them to explain a long stretch.
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,jobs_core::maintenance::leader=info"))
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let driver = if args.through_pooler {
        let pool = jobs_core::postgres::pooler::pool(&args.url, args.concurrency + 6)?;
        let driver = jobs_core::PgDriver::through_pooler(pool);
        match &args.listen_url {
            Some(url) => driver.listen_directly(url.clone()),
            None => driver,
        }
        .into_driver()
    } else {
        jobs_core::driver_for_url(&args.url, args.concurrency + 6)?
    };
    // Naming the jobs also keeps the library's registrations linked into the binary.
    let registry = Registry::from_inventory()?;
    for kind in [step::KIND, noop::KIND, once::KIND, batch_done::KIND] {
        if registry.get(kind).is_none() {
            return Err(format!("job kind {kind} is not registered").into());
        }
    }
    let mut builder =
        Worker::builder(driver).registry(registry).queue("faults", args.concurrency).node_name(&args.node);
    let mut rescuer = RescuerConfig::default();
    if !args.defaults {
        builder = builder
            .poll_interval(Duration::from_millis(200))
            .heartbeat_interval(Duration::from_millis(200))
            .orphan_grace(Duration::from_secs(3))
            .shutdown_timeout(Duration::from_secs(10))
            .leader(LeaderConfig {
                ttl: Duration::from_secs(1),
                interval: Duration::from_millis(200),
                holder_stale_after: Duration::from_millis(800),
                ..LeaderConfig::default()
            })
            .scheduler(SchedulerConfig {
                interval: Duration::from_millis(100),
                ..SchedulerConfig::default()
            });
        rescuer = RescuerConfig {
            interval: Duration::from_millis(200),
            node_stale_after: Duration::from_secs(2),
            ..RescuerConfig::default()
        };
    }
    if let Some(secs) = args.forget_nodes_after_secs {
        rescuer.forget_nodes_after = Duration::from_secs(secs);
    }
    let handle = builder.rescuer(rescuer).build()?.start().await?;
    println!("ready {}", handle.node());
    let mut terminate = signal(SignalKind::terminate())?;
    terminate.recv().await;
    let report = handle.shutdown().await?;
    println!("stopped handed_back={}", report.handed_back);
    Ok(())
}
