//! The benchmark: enqueue, burn-down, pickup latency, sustained throughput, memory — beside
//! the raw-SQL ceiling measured in the same run on the same server.
//!
//! `cargo run --release -p jobs-examples --bin bench -- --help`. Without `DATABASE_URL` it
//! starts a private Postgres with durable settings (fsync and synchronous_commit on);
//! `--backend sqlite` measures a SQLite file instead (and its own raw-SQL ceiling,
//! `ceiling_sqlite`); `--backend mysql` a private MariaDB with durable settings, or the
//! server `MYSQL_URL` names (`ceiling_mysql`). With `--backend sqlite` or `mysql`, a
//! `DATABASE_URL` of that scheme names a database to use as it is and keep.
//! Prints a table and writes the same figures as JSON (`--json`). Each scenario is a module:
//! `ceiling`, `enqueue`, `burndown` (in worker processes, `worker_process`), `latency`,
//! `memory`, `sustained`, `dashboard`; `measure` holds the counters they read.

mod burndown;
mod ceiling;
mod ceiling_mysql;
mod ceiling_sqlite;
mod claimed_row;
mod dashboard;
mod dashboard_data;
mod enqueue;
mod jobs;
mod latency;
mod measure;
mod memory;
mod otel;
mod sustained;
mod target;
mod worker_process;

use clap::{Parser, Subcommand};
use jobs_core::mysql::testing::LocalServer;
use jobs_core::testing::PgCluster;

use crate::burndown::Shape;
use crate::measure::{BenchResult, Figures};
use crate::target::Admin;

/// Durable settings for measuring: fsync and synchronous_commit stay on.
const BENCH_SETTINGS: &[(&str, &str)] = &[
    ("shared_buffers", "1GB"),
    ("max_wal_size", "4GB"),
    ("max_connections", "200"),
    ("autovacuum_naptime", "5s"),
    ("idle_in_transaction_session_timeout", "1min"),
];

#[derive(Parser, Debug)]
#[command(about = "Benchmarks the jobs framework against the raw-SQL ceiling.")]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// The database to measure: `postgres` (`DATABASE_URL`, or a private cluster),
    /// `sqlite` (a fresh file in the temporary directory, on the machine's disk) or `mysql`
    /// (`MYSQL_URL`, or a private MariaDB server).
    #[arg(long, default_value = "postgres", value_parser = ["postgres", "sqlite", "mysql"])]
    backend: String,
    /// Scenarios to run, in order: ceiling, enqueue, burndown, burndown-delete, burndown-chains
    /// (chains of 10), burndown-batches (sealed batches of 1,000 and a callback each),
    /// burndown-global-limit (a global limit equal to the slots), burndown-per-key (at most
    /// 1 running per key over `--keys` keys), latency,
    /// latency-other-process, memory, sustained, dashboard. By default the ceiling runs between the framework's
    /// scenarios: each ratio divides by the mean of the ceiling runs just before and just
    /// after its scenario, because the machine's speed drifts over minutes.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ceiling,enqueue,ceiling,burndown,ceiling,burndown-delete,ceiling,latency,memory"
    )]
    scenarios: Vec<String>,
    /// Jobs preloaded for a burn-down.
    #[arg(long, default_value_t = 200_000)]
    jobs: usize,
    /// Burn-down shapes, each `PxC`: P worker processes of C slots. The ceiling's clients
    /// hold up to 4 × 100 claimed jobs at once; `4x100` and `1x400` hold as many, `1x800`
    /// claims twice as many per statement.
    #[arg(long, value_delimiter = ',', default_value = "1x10,1x24,1x100,1x400,1x800,4x100")]
    shapes: Vec<ShapeArg>,
    /// Slots of the worker in the sustained scenario.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Claim statements in flight per queue (the worker's `claims_in_flight`).
    #[arg(long, default_value_t = 1)]
    claims_in_flight: usize,
    /// The most jobs one claim asks for (the worker's `max_fetch`). Below a shape's slots,
    /// the next claim goes out while the last batch still runs.
    #[arg(long, default_value_t = 1_000)]
    max_fetch: usize,
    /// The worker's `prefetch_window` in milliseconds: each queue buffers what its slots
    /// finish in this long beyond its free slots; 0 turns the buffer off.
    #[arg(long, default_value_t = 20)]
    prefetch_window_ms: u64,
    /// The queue's `QueueConfig::prefetch` cap (default: the framework's).
    #[arg(long)]
    prefetch: Option<usize>,
    /// Burn-downs spread their jobs over this many queues, each worker process serving all
    /// of them with its slots split between them (names get a `_q<N>` suffix when above 1).
    #[arg(long, default_value_t = 1)]
    queues: usize,
    /// Burn-downs tag each job with one of this many tenants (`tenant_<N>`); 0: no tags.
    #[arg(long, default_value_t = 0)]
    tenants: usize,
    /// Partition keys of the `burndown-per-key` scenario (at most 1 running per key).
    #[arg(long, default_value_t = 1_000)]
    keys: usize,
    /// How long each burn-down job takes, ms (it waits, as a call to another service
    /// would); 0: no-op jobs.
    #[arg(long, default_value_t = 0)]
    job_ms: u64,
    /// Tasks enqueueing concurrently in the enqueue scenario (N); the batched run is repeated
    /// for each.
    #[arg(long, value_delimiter = ',', default_value = "4,8")]
    enqueue_tasks: Vec<usize>,
    /// Jobs per call in the enqueue scenario's batched run.
    #[arg(long, default_value_t = 100)]
    enqueue_batch: usize,
    /// Enqueue rate for the latency scenario, jobs/s.
    #[arg(long, default_value_t = 100)]
    rate: u64,
    /// Seconds per timed scenario (enqueue, latency, ceiling).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Jobs through the table for the sustained scenario.
    #[arg(long, default_value_t = 10_000_000)]
    sustained_jobs: usize,
    /// How long the sustained scenario keeps completed jobs before its pruner deletes them,
    /// in seconds; 0 keeps them all (the table then grows by every job).
    #[arg(long, default_value_t = 60)]
    sustained_retention_secs: u64,
    /// Where the pgbench ceiling scripts are.
    #[arg(long, default_value = "../shared/bench")]
    ceiling_dir: String,
    /// Indexes to drop before measuring (to measure what each costs).
    #[arg(long, value_delimiter = ',')]
    drop_indexes: Vec<String>,
    /// Jobs loaded for the dashboard scenario.
    #[arg(long, default_value_t = 5_000_000)]
    dashboard_jobs: u64,
    /// The shapes of the dashboard scenario's data, each loaded and measured in turn:
    /// `today` (20 tenants, 10 kinds, 5 queues), `wide` (1,000 tenants, 120 kinds, 24
    /// queues, 50 error types) or `tenants=N:kinds=N:queues=N:errors=N`.
    #[arg(long, value_delimiter = ',', default_value = "today,wide")]
    dashboard_shapes: Vec<dashboard_data::DataShape>,
    /// Measures the dashboard on the jobs already in the database (loaded by an earlier run
    /// of the same shape and size) instead of loading them again.
    #[arg(long)]
    dashboard_reuse: bool,
    /// Measures only the dashboard pages whose address contains this text.
    #[arg(long, default_value = "")]
    dashboard_pages: String,
    /// Extra SQL to run before measuring (e.g. to measure an index's cost).
    #[arg(long)]
    setup_sql: Option<String>,
    /// Write the figures as JSON here.
    #[arg(long, default_value = "target/bench.json")]
    json: String,
}

/// `PxC`: P worker processes of C slots each.
#[derive(Debug, Clone, Copy)]
struct ShapeArg {
    processes: usize,
    concurrency: usize,
}

impl std::str::FromStr for ShapeArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (p, c) = s.split_once('x').ok_or_else(|| format!("`{s}`: a shape is PxC, e.g. 4x100"))?;
        let number = |v: &str| {
            v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| format!("`{s}`: bad number `{v}`"))
        };
        Ok(ShapeArg { processes: number(p)?, concurrency: number(c)? })
    }
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// A burn-down's worker process (started by the benchmark itself).
    #[command(hide = true)]
    WorkerProcess(worker_process::WorkerArgs),
}

#[tokio::main]
async fn main() -> BenchResult {
    let args = Args::parse();
    // Kept until the end: dropped, it exports what is left and stops.
    let _otel = otel::install()?;
    if let Some(Mode::WorkerProcess(worker)) = args.mode {
        return worker_process::run(worker).await;
    }
    let sqlite_dir = std::env::temp_dir().join(format!("jobs-bench-sqlite-{}", std::process::id()));
    let mut mariadb = None;
    let (cluster, url) = match args.backend.as_str() {
        // A SQLite file of one's own (`DATABASE_URL=sqlite://…`) is kept after the run.
        "sqlite" => match std::env::var("DATABASE_URL") {
            Ok(url) if url.starts_with("sqlite:") => (None, url),
            _ => {
                std::fs::create_dir_all(&sqlite_dir)?;
                (None, format!("sqlite://{}", sqlite_dir.join("bench.db").display()))
            }
        },
        // A database of one's own (`DATABASE_URL=mysql://…`) is used as it is, and kept.
        "mysql" => match std::env::var("DATABASE_URL") {
            Ok(url) if url.starts_with("mysql:") => (None, url),
            _ => (None, mysql_database(&mut mariadb).await?),
        },
        _ => PgCluster::from_env_or_private(BENCH_SETTINGS)?,
    };
    let admin = Admin::open(&url, 8)?;
    admin.driver.migrate().await?;
    for index in &args.drop_indexes {
        if !index.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad index name `{index}`").into());
        }
        admin.sql(&format!("DROP INDEX IF EXISTS {index}")).await?;
        println!("dropped index {index}");
    }
    if let Some(setup) = &args.setup_sql {
        admin.sql(setup).await?;
        println!("ran setup: {setup}");
    }
    let mut figures = Figures::new();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!(
        "# jobs benchmark: {}, {cores} cores, durable commits, {}",
        admin.driver.name(),
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    let postgres_only = |scenario: &str| -> BenchResult {
        if args.backend != "postgres" {
            return Err(format!("the `{scenario}` scenario runs on Postgres only").into());
        }
        Ok(())
    };
    let shape = |s: &ShapeArg, delete| Shape {
        jobs: args.jobs,
        processes: s.processes,
        concurrency: s.concurrency,
        claims_in_flight: args.claims_in_flight,
        max_fetch: args.max_fetch,
        prefetch_window_ms: args.prefetch_window_ms,
        prefetch: args.prefetch,
        queues: args.queues,
        tenants: args.tenants,
        delete,
        dependencies: burndown::Dependencies::None,
        limits: burndown::Limits::None,
        job_ms: args.job_ms,
    };
    // (framework figure, ceiling figure, ceiling runs before it)
    let mut ratios: Vec<(String, String, usize)> = Vec::new();
    let mut ceilings_run = 0;
    for scenario in &args.scenarios {
        match scenario.as_str() {
            "ceiling" if args.backend == "sqlite" => {
                ceiling_sqlite::run(&sqlite_dir, args.seconds, &mut figures)?;
                ceilings_run += 1;
            }
            "ceiling" if args.backend == "mysql" => {
                ceiling_mysql::run(&url, args.seconds, &mut figures).await?;
                ceilings_run += 1;
            }
            "ceiling" => {
                ceiling::run(cluster.as_ref(), &url, &args.ceiling_dir, args.seconds, &mut figures)?;
                ceilings_run += 1;
            }
            "enqueue" => {
                enqueue::run(&admin, args.seconds, &args.enqueue_tasks, args.enqueue_batch, &mut figures)
                    .await?;
                for tasks in &args.enqueue_tasks {
                    let name = format!("enqueue_{}_x{tasks}", args.enqueue_batch);
                    ratios.push((name, format!("ceiling_enqueue_{}", args.enqueue_batch), ceilings_run));
                }
            }
            "burndown-chains" | "burndown-batches" => {
                let (dependencies, kind) = if scenario == "burndown-chains" {
                    (burndown::Dependencies::Chains(10), "burndown_chains10")
                } else {
                    (burndown::Dependencies::Batches(1_000), "burndown_batches1000")
                };
                for s in &args.shapes {
                    let name = format!("{kind}_{}x{}", s.processes, s.concurrency);
                    let shape = burndown::Shape { dependencies, ..shape(s, false) };
                    burndown::run(&url, shape, &name, &mut figures).await?;
                    ratios.push((name, "ceiling_claim_100_update".to_owned(), ceilings_run));
                }
            }
            "burndown-global-limit" | "burndown-per-key" => {
                let (limits, kind) = if scenario == "burndown-global-limit" {
                    (burndown::Limits::GlobalAtSlots, "burndown_global_limit".to_owned())
                } else {
                    (burndown::Limits::OnePerKey(args.keys), format!("burndown_per_key_{}", args.keys))
                };
                for s in &args.shapes {
                    let name = format!("{kind}_{}x{}", s.processes, s.concurrency);
                    let shape = burndown::Shape { limits, ..shape(s, false) };
                    burndown::run(&url, shape, &name, &mut figures).await?;
                    ratios.push((name, "ceiling_claim_100_update".to_owned(), ceilings_run));
                }
            }
            "burndown" | "burndown-delete" => {
                let delete = scenario == "burndown-delete";
                let (kind, ceiling) = if delete {
                    ("burndown_delete", "ceiling_claim_100_delete")
                } else {
                    ("burndown_kept", "ceiling_claim_100_update")
                };
                for s in &args.shapes {
                    let queues = if args.queues > 1 { format!("_q{}", args.queues) } else { String::new() };
                    let name = format!("{kind}_{}x{}{queues}", s.processes, s.concurrency);
                    burndown::run(&url, shape(s, delete), &name, &mut figures).await?;
                    ratios.push((name, ceiling.to_owned(), ceilings_run));
                }
            }
            "latency" => latency::run(&url, args.rate, args.seconds, false, &mut figures).await?,
            "latency-other-process" => {
                latency::run(&url, args.rate, args.seconds, true, &mut figures).await?
            }
            "memory" => memory::run(&url, &mut figures).await?,
            "sustained" => {
                postgres_only("sustained")?;
                let retention = (args.sustained_retention_secs > 0)
                    .then(|| std::time::Duration::from_secs(args.sustained_retention_secs));
                sustained::run(&url, args.sustained_jobs, args.concurrency, retention, &mut figures).await?
            }
            "dashboard" => {
                dashboard::run(
                    &admin,
                    args.dashboard_jobs,
                    &args.dashboard_shapes,
                    args.dashboard_reuse,
                    &args.dashboard_pages,
                    &mut figures,
                )
                .await?
            }
            other => return Err(format!("unknown scenario `{other}`").into()),
        }
    }
    for (framework, ceiling, before) in ratios {
        let rate = figures.get(&format!("framework_{framework}")).and_then(|v| v["jobs_per_s"].as_f64());
        let runs = figures.get(&ceiling).and_then(|v| ceiling::neighbours(v, before));
        if let (Some(f), Some(c)) = (rate, runs) {
            println!(
                "ratio {framework} / {ceiling} = {:.2}   (ceiling {c:.0} jobs/s, around the scenario)",
                f / c
            );
            figures.insert(format!("ratio_{framework}"), serde_json::json!(f / c));
        }
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&figures)?)?;
    println!("figures written to {}", args.json);
    drop(admin);
    if args.backend == "sqlite" {
        let _ = std::fs::remove_dir_all(&sqlite_dir);
    }
    drop(mariadb);
    Ok(())
}

/// A fresh database on the server `MYSQL_URL` names, or on a private MariaDB with durable
/// settings (kept in `server` for the run).
async fn mysql_database(server: &mut Option<LocalServer>) -> BenchResult<String> {
    use jobs_core::mysql::testing::{BENCH_SETTINGS as MARIADB_SETTINGS, Server, TestDatabase};
    let on = match std::env::var("MYSQL_URL") {
        Ok(url) if !url.is_empty() => Server::new(url),
        _ => {
            let started =
                tokio::task::spawn_blocking(|| LocalServer::start_private_with(MARIADB_SETTINGS)).await??;
            let on = Server::new(started.url("mysql"));
            *server = Some(started);
            on
        }
    };
    Ok(TestDatabase::on(&on).await?.url().to_owned())
}
