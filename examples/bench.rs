//! The benchmark: enqueue, burn-down, pickup latency, sustained throughput, memory — beside
//! the raw-SQL ceiling measured in the same run on the same server.
//!
//! `cargo run --release -p jobs-examples --bin bench -- --help`. Without `DATABASE_URL` it
//! starts a private Postgres with durable settings (fsync and synchronous_commit on).
//! Prints a table and writes the same figures as JSON (`--json`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Double};
use jobs_core::testing::PgCluster;
use jobs_core::{JobContext, Pool, QueueConfig, Registry, Worker, enqueue_many, job};

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
    /// Scenarios to run: enqueue, burndown, burndown-delete, latency, memory, sustained, ceiling.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ceiling,enqueue,burndown,burndown-delete,latency,memory"
    )]
    scenarios: Vec<String>,
    /// Jobs preloaded for a burn-down.
    #[arg(long, default_value_t = 200_000)]
    jobs: usize,
    /// Concurrency per worker.
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Worker instances (each with its own pool) working the burn-down.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Claim statements in flight per queue (the worker's `claims_in_flight`).
    #[arg(long, default_value_t = 1)]
    claims_in_flight: usize,
    /// Enqueue rate for the latency scenario, jobs/s.
    #[arg(long, default_value_t = 100)]
    rate: u64,
    /// Seconds per timed scenario (enqueue, latency, ceiling).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Jobs through the table for the sustained scenario.
    #[arg(long, default_value_t = 10_000_000)]
    sustained_jobs: usize,
    /// Where the pgbench ceiling scripts are.
    #[arg(long, default_value = "../shared/bench")]
    ceiling_dir: String,
    /// Indexes to drop before measuring (to measure what each costs).
    #[arg(long, value_delimiter = ',')]
    drop_indexes: Vec<String>,
    /// Jobs loaded for the dashboard scenario.
    #[arg(long, default_value_t = 5_000_000)]
    dashboard_jobs: u64,
    /// Extra SQL to run before measuring (e.g. to measure an index's cost).
    #[arg(long)]
    setup_sql: Option<String>,
    /// Write the figures as JSON here.
    #[arg(long, default_value = "target/bench.json")]
    json: String,
}

#[job(kind = "bench.noop", queue = "bench")]
async fn noop(_ctx: JobContext, _n: i64) -> Result<(), std::convert::Infallible> {
    DONE.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[job(kind = "bench.pickup", queue = "latency")]
async fn pickup(ctx: JobContext) -> Result<(), std::convert::Infallible> {
    let waited = (chrono::Utc::now() - ctx.created_at()).num_microseconds().unwrap_or(0) as f64 / 1000.0;
    LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).push(waited);
    Ok(())
}

#[job(kind = "bench.sleep", queue = "sleepy")]
async fn sleepy(ctx: JobContext) -> Result<(), std::convert::Infallible> {
    ctx.cancelled().await;
    Ok(())
}

static DONE: AtomicU64 = AtomicU64::new(0);
static LATENCIES: Mutex<Vec<f64>> = Mutex::new(Vec::new());

type Figures = BTreeMap<String, serde_json::Value>;

#[derive(QueryableByName)]
struct Percentiles {
    #[diesel(sql_type = Double)]
    p50: f64,
    #[diesel(sql_type = Double)]
    p99: f64,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// CPU seconds (user + system) this process has used.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds the whole machine has spent busy (every process: the worker and Postgres).
fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .map(|l| l.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal
    let busy: f64 =
        ticks.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, t)| t).sum();
    busy / 100.0
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

async fn sql(pool: &Pool, statement: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut conn = pool.get().await?;
    diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), &mut conn).await?;
    Ok(())
}

async fn count(pool: &Pool, statement: &str) -> Result<i64, Box<dyn std::error::Error>> {
    let mut conn = pool.get().await?;
    Ok(diesel_async::RunQueryDsl::get_result::<Count>(diesel::sql_query(statement), &mut conn).await?.n)
}

async fn reset(pool: &Pool) -> Result<(), Box<dyn std::error::Error>> {
    sql(pool, "TRUNCATE jobs").await?;
    sql(pool, "VACUUM ANALYZE jobs").await
}

async fn preload(pool: &Pool, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut i = 0;
    while i < n {
        let batch = (n - i).min(10_000);
        enqueue_many(pool, (i..i + batch).map(|k| noop::build(k as i64))).await?;
        i += batch;
    }
    sql(pool, "VACUUM ANALYZE jobs").await
}

fn registry() -> Result<Registry, jobs_core::Error> {
    Registry::new().with::<noop>()?.with::<pickup>()?.with::<sleepy>()
}

async fn enqueue_scenario(
    pool: &Pool,
    seconds: u64,
    figures: &mut Figures,
) -> Result<(), Box<dyn std::error::Error>> {
    for (name, per_statement) in [("enqueue_1", 1usize), ("enqueue_100", 100)] {
        reset(pool).await?;
        let (cpu0, busy0) = (cpu_seconds(), machine_busy_seconds());
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let inserted = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (pool, inserted) = (pool.clone(), inserted.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0i64;
                while Instant::now() < deadline {
                    let batch = (0..per_statement).map(|k| noop::build(n + k as i64));
                    if enqueue_many(&pool, batch).await.is_ok() {
                        inserted.fetch_add(per_statement as u64, Ordering::Relaxed);
                    }
                    n += per_statement as i64;
                }
            }));
        }
        for t in tasks {
            t.await?;
        }
        let jobs = inserted.load(Ordering::Relaxed).max(1) as f64;
        let rate = jobs / seconds as f64;
        let client_us = (cpu_seconds() - cpu0) / jobs * 1e6;
        let machine_us = (machine_busy_seconds() - busy0) / jobs * 1e6;
        println!(
            "{name:<22} {rate:>10.0} jobs/s   (4 tasks, {per_statement} per statement, {client_us:.1} µs client CPU and {machine_us:.1} µs machine CPU per job)"
        );
        figures.insert(
            format!("framework_{name}"),
            serde_json::json!({ "jobs_per_s": rate, "client_cpu_us_per_job": client_us, "machine_cpu_us_per_job": machine_us }),
        );
    }
    Ok(())
}

async fn burndown(
    url: &str,
    args: &Args,
    delete: bool,
    figures: &mut Figures,
) -> Result<(), Box<dyn std::error::Error>> {
    let admin = jobs_core::db::pool(url, 4)?;
    reset(&admin).await?;
    preload(&admin, args.jobs).await?;
    DONE.store(0, Ordering::Relaxed);
    let cpu0 = cpu_seconds();
    let busy0 = machine_busy_seconds();
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 0..args.workers {
        let pool = jobs_core::db::pool(url, 8)?;
        let mut queue = QueueConfig::new("bench", args.concurrency);
        if delete {
            queue = queue.delete_on_completion();
        }
        let worker = Worker::builder(pool)
            .queue_config(queue)
            .registry(registry()?)
            .node_name(format!("bench-{i}"))
            .claims_in_flight(args.claims_in_flight)
            .build()?
            .start()
            .await?;
        handles.push(worker);
    }
    let target = args.jobs as u64;
    while DONE.load(Ordering::Relaxed) < target {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Every outcome written?
    let pending_sql = if delete {
        "SELECT count(*) AS n FROM jobs"
    } else {
        "SELECT count(*) AS n FROM jobs WHERE state <> 'completed'"
    };
    while count(&admin, pending_sql).await? > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let machine_us_per_job = (machine_busy_seconds() - busy0) / args.jobs as f64 * 1e6;
    let fetches: u64 = handles.iter().map(|h| h.fetch_count("bench")).sum();
    for h in handles {
        h.shutdown().await?;
    }
    println!("  {fetches} claims, {:.1} jobs per claim", args.jobs as f64 / fetches.max(1) as f64);
    let rate = args.jobs as f64 / elapsed;
    let cpu_per_1000 = cpu / args.jobs as f64 * 1000.0 * 1000.0;
    let name = if delete { "burndown_delete" } else { "burndown_kept" };
    let mut entry = serde_json::json!({
        "jobs": args.jobs, "workers": args.workers, "concurrency": args.concurrency,
        "seconds": elapsed, "jobs_per_s": rate, "worker_cpu_ms_per_1000_jobs": cpu_per_1000,
        "machine_cpu_us_per_job": machine_us_per_job,
    });
    let mut extra = String::new();
    if !delete {
        let mut conn = admin.get().await?;
        let p: Percentiles = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(
            "SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM finalized_at - attempted_at)) * 1000)::float8 AS p50,
                    (percentile_cont(0.99) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM finalized_at - attempted_at)) * 1000)::float8 AS p99
             FROM jobs",
            ),
            &mut conn,
        )
        .await?;
        entry["claim_to_completion_ms"] = serde_json::json!({ "p50": p.p50, "p99": p.p99 });
        extra = format!("  claim→completion p50 {:.1} ms, p99 {:.1} ms", p.p50, p.p99);
    }
    println!(
        "{name:<22} {rate:>10.0} jobs/s   ({} jobs, {}×{} slots, {cpu_per_1000:.1} ms worker CPU per 1,000 jobs, {machine_us_per_job:.1} µs machine CPU per job){extra}",
        args.jobs, args.workers, args.concurrency
    );
    figures.insert(format!("framework_{name}"), entry);
    Ok(())
}

async fn latency(url: &str, args: &Args, figures: &mut Figures) -> Result<(), Box<dyn std::error::Error>> {
    let pool = jobs_core::db::pool(url, 8)?;
    reset(&pool).await?;
    LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let worker =
        Worker::builder(pool.clone()).queue("latency", 50).registry(registry()?).build()?.start().await?;
    while !worker.is_listening() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let total = args.rate * args.seconds;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate as f64));
    for _ in 0..total {
        ticker.tick().await;
        pickup::enqueue(&pool, ()).await?;
    }
    while (LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).len() as u64) < total {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.shutdown().await?;
    let mut samples = LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).clone();
    samples.sort_by(f64::total_cmp);
    let (p50, p99, max) =
        (percentile(&samples, 0.5), percentile(&samples, 0.99), samples.last().copied().unwrap_or(0.0));
    println!(
        "{:<22} p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms   ({} jobs/s for {} s)",
        "pickup_latency", args.rate, args.seconds
    );
    figures.insert(
        "framework_pickup_latency".into(),
        serde_json::json!({ "rate": args.rate, "p50_ms": p50, "p99_ms": p99, "max_ms": max }),
    );
    Ok(())
}

async fn memory(url: &str, figures: &mut Figures) -> Result<(), Box<dyn std::error::Error>> {
    let pool = jobs_core::db::pool(url, 8)?;
    reset(&pool).await?;
    let before = rss_mb();
    let worker =
        Worker::builder(pool.clone()).queue("sleepy", 1_000).registry(registry()?).build()?.start().await?;
    enqueue_many(&pool, (0..1_000).map(|_| sleepy::build(()))).await?;
    while worker.running() < 1_000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rss = rss_mb();
    let mut conn = pool.get().await?;
    let all = jobs_core::db::dashboard::JobFilter::default();
    let ids = jobs_core::db::dashboard::matching_ids(&mut conn, &all, None, 1_000).await?;
    jobs_core::db::control::cancel_many(&mut conn, &ids).await?;
    worker.shutdown().await?;
    println!(
        "{:<22} {rss:>10.1} MB RSS with 1,000 running jobs (process RSS before the worker: {before:.1} MB)",
        "memory"
    );
    figures.insert(
        "framework_memory".into(),
        serde_json::json!({ "rss_mb_at_1000_running": rss, "rss_mb_before": before }),
    );
    Ok(())
}

async fn sustained(url: &str, args: &Args, figures: &mut Figures) -> Result<(), Box<dyn std::error::Error>> {
    let admin = jobs_core::db::pool(url, 4)?;
    reset(&admin).await?;
    let worker = Worker::builder(jobs_core::db::pool(url, 8)?)
        .queue("bench", args.concurrency)
        .registry(registry()?)
        .build()?
        .start()
        .await?;
    DONE.store(0, Ordering::Relaxed);
    let million = 1_000_000u64;
    let mut per_million = Vec::new();
    let mut enqueued = 0usize;
    let mut mark = Instant::now();
    // Keep a backlog of up to 200k jobs; measure completions per million.
    while (DONE.load(Ordering::Relaxed) as usize) < args.sustained_jobs {
        let done = DONE.load(Ordering::Relaxed) as usize;
        if enqueued < args.sustained_jobs && enqueued - done < 200_000 {
            let batch = (args.sustained_jobs - enqueued).min(10_000);
            enqueue_many(&admin, (enqueued..enqueued + batch).map(|k| noop::build(k as i64))).await?;
            enqueued += batch;
        } else {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if DONE.load(Ordering::Relaxed) >= (per_million.len() as u64 + 1) * million {
            let rate = million as f64 / mark.elapsed().as_secs_f64();
            println!("  million {:>2}: {rate:>8.0} jobs/s", per_million.len() + 1);
            per_million.push(rate);
            mark = Instant::now();
        }
    }
    worker.shutdown().await?;
    let first = per_million.first().copied().unwrap_or(0.0);
    let last = per_million.last().copied().unwrap_or(0.0);
    println!(
        "{:<22} first million {first:.0} jobs/s, last {last:.0} jobs/s ({:+.1} %)",
        "sustained",
        (last / first - 1.0) * 100.0
    );
    figures
        .insert("framework_sustained".into(), serde_json::json!({ "jobs_per_s_per_million": per_million }));
    Ok(())
}

/// Loads `n` jobs straight into the table (97 % completed, the rest spread over the other
/// states), then times each dashboard page: the median of 5 requests after a warm-up.
async fn dashboard(url: &str, n: u64, figures: &mut Figures) -> Result<(), Box<dyn std::error::Error>> {
    use actix_web::{App, test};
    let pool = jobs_core::db::pool(url, 8)?;
    reset(&pool).await?;
    let load = Instant::now();
    let step = 500_000u64;
    let mut from = 1u64;
    while from <= n {
        let to = (from + step - 1).min(n);
        sql(&pool, &format!(
            "INSERT INTO jobs (state, queue, kind, args, meta, attempt, created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors)
             SELECT s.state, 'queue_' || (g % 5), 'kind_' || (g % 10),
                    jsonb_build_object('user_id', g % 100000, 'order', g), '{{\"request_id\": \"r\"}}'::jsonb,
                    CASE WHEN s.state = 'available' THEN 0 ELSE 1 END,
                    now() - (({n} - g) || ' milliseconds')::interval, now() - (({n} - g) || ' milliseconds')::interval,
                    CASE WHEN s.state = 'available' THEN NULL ELSE now() END,
                    CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN now() END,
                    CASE WHEN s.state = 'available' THEN '{{}}'::text[] ELSE '{{bench-node}}'::text[] END,
                    CASE WHEN s.state IN ('discarded', 'retryable') THEN '[{{\"attempt\": 1, \"message\": \"boom\"}}]'::jsonb ELSE '[]'::jsonb END
             FROM generate_series({from}, {to}) AS g,
                  LATERAL (SELECT CASE WHEN g % 100 < 97 THEN 'completed' WHEN g % 100 = 97 THEN 'discarded'
                                       WHEN g % 200 = 196 THEN 'retryable' WHEN g % 200 = 197 THEN 'retryable'
                                       WHEN g % 200 = 198 THEN 'available' ELSE 'cancelled' END::job_state AS state) AS s"
        ))
        .await?;
        from = to + 1;
    }
    sql(&pool, "VACUUM ANALYZE jobs").await?;
    println!("dashboard: loaded {n} jobs in {:.0} s", load.elapsed().as_secs_f64());
    let config = jobs_dashboard::DashboardConfig::new(pool.clone());
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let mid = count(&pool, "SELECT (min(id) + max(id)) / 2 AS n FROM jobs").await?;
    let pages = [
        "/jobs/".to_owned(),
        "/jobs/jobs".to_owned(),
        format!("/jobs/jobs?before={mid}"),
        "/jobs/jobs?state=discarded".to_owned(),
        "/jobs/jobs?state=available".to_owned(),
        "/jobs/jobs?queue=queue_3".to_owned(),
        "/jobs/jobs?queue=queue_3&state=retryable".to_owned(),
        "/jobs/jobs?kind=kind_7".to_owned(),
        "/jobs/jobs?state=discarded&q=user_id%3D4297".to_owned(),
        "/jobs/jobs?q=user_id%3D4297".to_owned(),
        format!("/jobs/jobs/{mid}"),
        "/jobs/queues".to_owned(),
        "/jobs/cron".to_owned(),
    ];
    let mut timings = serde_json::Map::new();
    for page in &pages {
        let mut samples = Vec::new();
        for i in 0..6 {
            let started = Instant::now();
            let response = test::call_service(&app, test::TestRequest::get().uri(page).to_request()).await;
            let status = response.status();
            let _ = test::read_body(response).await;
            if !status.is_success() {
                return Err(format!("{page}: {status}").into());
            }
            if i > 0 {
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        samples.sort_by(f64::total_cmp);
        let median = samples[samples.len() / 2];
        println!("  {page:<48} {median:>8.1} ms");
        timings.insert(page.clone(), serde_json::json!(median));
    }
    figures.insert("dashboard_page_ms".into(), serde_json::json!({ "jobs": n, "median_ms": timings }));
    Ok(())
}

fn ceiling(
    cluster: Option<&PgCluster>,
    url: &str,
    args: &Args,
    figures: &mut Figures,
) -> Result<(), Box<dyn std::error::Error>> {
    let script = std::path::Path::new(&args.ceiling_dir).join("ceiling.sh");
    if !script.exists() {
        println!("ceiling: {} not found; skipped", script.display());
        return Ok(());
    }
    let mut command = std::process::Command::new("bash");
    command.arg(&script).arg(args.seconds.to_string()).arg("4");
    match cluster {
        // The script derives its database's URL by replacing the URL's last path segment,
        // so give it a socket-free URL and the socket directory through PGHOST.
        Some(cluster) => {
            command.env("DATABASE_URL", "postgresql://postgres@/postgres").env("PGHOST", cluster.socket_dir())
        }
        // The same for a server of the user's: a `?host=` parameter becomes PGHOST.
        // A host in the URL itself would override PGHOST for psql, so it is dropped.
        None => match url.split_once('?') {
            Some((base, query)) => {
                let mut base = base.to_owned();
                for (key, value) in query.split('&').filter_map(|p| p.split_once('=')) {
                    if key == "host" {
                        command.env("PGHOST", value);
                        if let Some(at) = base.find('@')
                            && let Some(slash) = base[at..].find('/')
                        {
                            base.replace_range(at + 1..at + slash, "");
                        }
                    }
                }
                command.env("DATABASE_URL", base)
            }
            None => command.env("DATABASE_URL", url),
        },
    };
    let out = command.output()?;
    if !out.status.success() {
        println!("ceiling: {} failed ({}):", script.display(), out.status);
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            println!("ceiling   {line}");
        }
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("ceiling {line}");
        if line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(name), Some(rate)) = (fields.first(), fields.get(3).and_then(|r| r.parse::<f64>().ok()))
        {
            figures.insert(format!("ceiling_{name}"), serde_json::json!({ "jobs_per_s": rate }));
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let (_cluster, url) = PgCluster::from_env_or_private(BENCH_SETTINGS)?;
    jobs_core::migrate(jobs_core::db::connect(&url).await?).await?;
    let pool = jobs_core::db::pool(&url, 8)?;
    for index in &args.drop_indexes {
        if !index.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad index name `{index}`").into());
        }
        sql(&pool, &format!("DROP INDEX IF EXISTS {index}")).await?;
        println!("dropped index {index}");
    }
    if let Some(setup) = &args.setup_sql {
        sql(&pool, setup).await?;
        println!("ran setup: {setup}");
    }
    let mut figures = Figures::new();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    println!(
        "# jobs benchmark: {cores} cores, synchronous_commit on, {}",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    for scenario in &args.scenarios {
        match scenario.as_str() {
            "ceiling" => ceiling(_cluster.as_ref(), &url, &args, &mut figures)?,
            "enqueue" => enqueue_scenario(&pool, args.seconds, &mut figures).await?,
            "burndown" => burndown(&url, &args, false, &mut figures).await?,
            "burndown-delete" => burndown(&url, &args, true, &mut figures).await?,
            "latency" => latency(&url, &args, &mut figures).await?,
            "memory" => memory(&url, &mut figures).await?,
            "sustained" => sustained(&url, &args, &mut figures).await?,
            "dashboard" => dashboard(&url, args.dashboard_jobs, &mut figures).await?,
            other => return Err(format!("unknown scenario `{other}`").into()),
        }
    }
    for (framework, ceiling) in [
        ("framework_burndown_kept", "ceiling_claim_100_update"),
        ("framework_burndown_delete", "ceiling_claim_100_delete"),
        ("framework_enqueue_100", "ceiling_enqueue_100"),
    ] {
        let rate = |k: &str| figures.get(k).and_then(|v| v["jobs_per_s"].as_f64());
        if let (Some(f), Some(c)) = (rate(framework), rate(ceiling)) {
            println!("ratio {framework} / {ceiling} = {:.2}", f / c);
            figures.insert(format!("ratio_{framework}"), serde_json::json!(f / c));
        }
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&figures)?)?;
    println!("figures written to {}", args.json);
    Ok(())
}
