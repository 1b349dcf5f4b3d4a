//! Burn-down: preload N no-op jobs, then work them in P worker processes of C slots each.
//!
//! The queue is paused while the jobs load and the workers start; resuming it starts the
//! clock. The run ends when every job has finished and every outcome is written.

use std::time::{Duration, Instant};

use jobs_core::driver::QueueSetPausedParams;
use jobs_core::{Batch, JobState, QueueLimits, Workflow, enqueue_many, set_queue_limits};

use crate::jobs::noop;
use crate::measure::{BenchResult, Figures, machine_busy_seconds, percentile, postgres_cpu_seconds};
use crate::target::Admin;
use crate::worker_process::{WorkerArgs, WorkerProcess};

/// A burn-down's shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Jobs preloaded.
    pub(crate) jobs: usize,
    /// Worker processes.
    pub(crate) processes: usize,
    /// Slots per worker.
    pub(crate) concurrency: usize,
    /// Claim statements in flight per worker.
    pub(crate) claims_in_flight: usize,
    /// The most jobs one claim asks for.
    pub(crate) max_fetch: usize,
    /// The worker's prefetch window, ms (0: no buffer).
    pub(crate) prefetch_window_ms: u64,
    /// The queue's prefetch cap (`None`: the framework's default).
    pub(crate) prefetch: Option<usize>,
    /// Queues the jobs are spread over (`bench`, `bench-1`, ...), each served by every
    /// process with its share of the slots.
    pub(crate) queues: usize,
    /// Each job is tagged with one of this many tenants (0: no tags).
    pub(crate) tenants: usize,
    /// Delete jobs on completion instead of keeping them.
    pub(crate) delete: bool,
    /// How the jobs depend on each other.
    pub(crate) dependencies: Dependencies,
    /// The queue's cluster-wide limits.
    pub(crate) limits: Limits,
    /// How long each job takes, ms.
    pub(crate) job_ms: u64,
}

/// A burn-down queue's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limits {
    /// None.
    None,
    /// A global limit equal to every process's slots together (it never binds: what it
    /// costs is the limited claim itself).
    GlobalAtSlots,
    /// At most 1 running per key, the jobs spread round robin over this many keys.
    OnePerKey(usize),
}

/// How a burn-down's jobs depend on each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dependencies {
    /// Not at all.
    None,
    /// In chains of this many jobs, each waiting for the one before (workflows of 100
    /// chains).
    Chains(usize),
    /// In sealed batches of this many members, each with a callback (one more job).
    Batches(usize),
}

impl Dependencies {
    /// The jobs a burn-down of `n` runs: a batch's callback is one more.
    pub(crate) fn jobs(self, n: usize) -> usize {
        match self {
            Dependencies::Batches(size) => n + n.div_ceil(size.max(1)),
            _ => n,
        }
    }
}

/// Loads `n` no-op jobs on the queue `bench` as `dependencies` says (chains or batches).
async fn preload_dependent(admin: &Admin, n: usize, dependencies: Dependencies) -> BenchResult {
    let mut k = 0;
    match dependencies {
        Dependencies::None => return preload(admin, n, 1, 0, 0).await,
        Dependencies::Chains(length) => {
            let length = length.max(1);
            while k < n {
                let mut flow = Workflow::new("bench");
                let mut previous = None;
                for i in 0..(n - k).min(100 * length) {
                    let job = noop::build((k + i) as i64).queue("bench");
                    previous = Some(match previous.filter(|_| i % length != 0) {
                        Some(before) => flow.add_after(job, [&before]),
                        None => flow.add(job),
                    });
                }
                k += flow.len();
                flow.enqueue(&admin.driver).await?;
            }
        }
        Dependencies::Batches(size) => {
            while k < n {
                let mut batch = Batch::new("bench", noop::build(-1).queue("bench"));
                for i in 0..(n - k).min(size.max(1)) {
                    batch.add(noop::build((k + i) as i64).queue("bench"));
                }
                k += size.max(1).min(n - k);
                batch.sealed().enqueue(&admin.driver).await?;
            }
        }
    }
    admin.analyze().await
}

/// Loads `n` available no-op jobs over `queues` queues, round robin, 10,000 per statement,
/// each tagged with one of `tenants` tenants when there are any, and given one of `keys`
/// partition keys when there are any.
pub(crate) async fn preload(
    admin: &Admin,
    n: usize,
    queues: usize,
    tenants: usize,
    keys: usize,
) -> BenchResult {
    let names = queue_names(queues);
    let mut i = 0;
    while i < n {
        let batch = (n - i).min(10_000);
        let jobs = (i..i + batch).map(|k| {
            let job = noop::build(k as i64).queue(&names[k % names.len()]);
            let job = if tenants == 0 { job } else { job.tag(format!("tenant_{}", k % tenants)) };
            if keys == 0 { job } else { job.partition_key(format!("customer_{}", k % keys)) }
        });
        enqueue_many(&admin.driver, jobs).await?;
        i += batch;
    }
    admin.analyze().await
}

/// The burn-down's queues: `bench`, then `bench-1`, `bench-2`, ...
pub(crate) fn queue_names(queues: usize) -> Vec<String> {
    (0..queues.max(1)).map(|i| if i == 0 { "bench".to_owned() } else { format!("bench-{i}") }).collect()
}

async fn pause(admin: &Admin, queues: usize, paused: bool) -> BenchResult {
    for queue in queue_names(queues) {
        admin.driver.queue_set_paused(QueueSetPausedParams { queue: &queue, paused }).await?;
    }
    Ok(())
}

/// Runs one burn-down and records it as `name` in `figures`.
pub(crate) async fn run(url: &str, shape: Shape, name: &str, figures: &mut Figures) -> BenchResult {
    let admin = Admin::open(url, 4)?;
    admin.reset().await?;
    pause(&admin, shape.queues, true).await?;
    let keys = match shape.limits {
        Limits::OnePerKey(keys) => keys,
        _ => 0,
    };
    let limits = match shape.limits {
        Limits::None => None,
        Limits::GlobalAtSlots => Some(QueueLimits {
            global_limit: u32::try_from(shape.processes * shape.concurrency).ok(),
            ..QueueLimits::default()
        }),
        Limits::OnePerKey(_) => Some(QueueLimits { per_key_limit: Some(1), ..QueueLimits::default() }),
    };
    for queue in queue_names(shape.queues) {
        if let Some(limits) = limits {
            set_queue_limits(&admin.driver, &queue, limits).await?;
        }
    }
    if shape.dependencies == Dependencies::None {
        preload(&admin, shape.jobs, shape.queues, shape.tenants, keys).await?;
    } else {
        preload_dependent(&admin, shape.jobs, shape.dependencies).await?;
    }
    let total = shape.dependencies.jobs(shape.jobs);
    let mut workers = Vec::new();
    for i in 0..shape.processes {
        let args = WorkerArgs {
            concurrency: shape.concurrency,
            claims_in_flight: shape.claims_in_flight,
            max_fetch: shape.max_fetch,
            prefetch_window_ms: shape.prefetch_window_ms,
            prefetch: shape.prefetch,
            delete_on_completion: shape.delete,
            queues: shape.queues,
            node: format!("bench-{i}"),
            job_ms: shape.job_ms,
        };
        workers.push(WorkerProcess::start(url, &args)?);
    }
    for worker in &mut workers {
        worker.ready().await?;
    }

    let worker_cpu0: f64 = workers.iter().map(WorkerProcess::cpu_seconds).sum();
    let busy0 = machine_busy_seconds();
    let postgres0 = postgres_cpu_seconds();
    let started = Instant::now();
    pause(&admin, shape.queues, false).await?;
    let target = total as u64;
    while workers.iter().map(WorkerProcess::done).sum::<u64>() < target {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Every outcome written?
    let pending: &[JobState] = if shape.delete { &[] } else { &JobState::UNFINISHED };
    while admin.count(pending).await? > 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let machine_us_per_job = (machine_busy_seconds() - busy0) / total as f64 * 1e6;
    let postgres_us_per_job = (postgres_cpu_seconds() - postgres0) / total as f64 * 1e6;
    let worker_cpu = workers.iter().map(WorkerProcess::cpu_seconds).sum::<f64>() - worker_cpu0;
    let mut claims = 0;
    for worker in workers {
        claims += worker.stop().await?;
    }

    let rate = total as f64 / elapsed;
    let worker_ms_per_1000 = worker_cpu / total as f64 * 1e6;
    let mut entry = serde_json::json!({
        "jobs": total, "processes": shape.processes, "concurrency": shape.concurrency,
        "claims_in_flight": shape.claims_in_flight, "max_fetch": shape.max_fetch, "prefetch_window_ms": shape.prefetch_window_ms, "prefetch": shape.prefetch, "seconds": elapsed, "jobs_per_s": rate,
        "claims": claims, "worker_cpu_ms_per_1000_jobs": worker_ms_per_1000,
        "machine_cpu_us_per_job": machine_us_per_job, "queues": shape.queues,
        "postgres_cpu_us_per_job": postgres_us_per_job, "job_ms": shape.job_ms,
    });
    let mut extra = String::new();
    if !shape.delete {
        let ms = admin.claim_to_completion_ms().await?;
        let (p50, p99) = (percentile(&ms, 0.5), percentile(&ms, 0.99));
        entry["claim_to_completion_ms"] = serde_json::json!({ "p50": p50, "p99": p99 });
        extra = format!("  claim→completion p50 {p50:.1} ms, p99 {p99:.1} ms");
    }
    println!(
        "{name:<22} {rate:>10.0} jobs/s   ({} jobs, {}×{} slots, {:.1} jobs per claim, {worker_ms_per_1000:.1} ms worker CPU per 1,000 jobs, {machine_us_per_job:.1} µs machine CPU per job, {postgres_us_per_job:.1} µs of it Postgres){extra}",
        total,
        shape.processes,
        shape.concurrency,
        total as f64 / claims.max(1) as f64
    );
    figures.insert(format!("framework_{name}"), entry);
    // Left behind, the finished rows and dead versions would be vacuumed during the next
    // scenario (the ceiling's own database is dropped after it for the same reason).
    admin.reset().await
}
