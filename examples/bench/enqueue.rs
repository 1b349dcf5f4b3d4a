//! Enqueue: N tasks enqueue through one driver as fast as they can, one job per call and
//! `batch` jobs per call (one statement each on Postgres; one transaction on SQLite).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jobs_core::enqueue_many;

use crate::jobs::noop;
use crate::measure::{BenchResult, Figures, cpu_seconds, machine_busy_seconds};
use crate::target::Admin;

/// Runs enqueueing tasks for `seconds`: first the first of `task_counts` with one job per
/// call (`enqueue_1`), then each of `task_counts` with `batch` per call
/// (`enqueue_<batch>_x<tasks>`).
pub(crate) async fn run(
    admin: &Admin,
    seconds: u64,
    task_counts: &[usize],
    batch: usize,
    figures: &mut Figures,
) -> BenchResult {
    let first = task_counts.first().copied().unwrap_or(4);
    let runs = std::iter::once((first, 1, "enqueue_1".to_owned()))
        .chain(task_counts.iter().map(|&tasks| (tasks, batch, format!("enqueue_{batch}_x{tasks}"))));
    for (tasks, per_call, name) in runs {
        admin.reset().await?;
        let (cpu0, busy0) = (cpu_seconds(), machine_busy_seconds());
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let inserted = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for _ in 0..tasks {
            let (driver, inserted) = (admin.driver.clone(), inserted.clone());
            handles.push(tokio::spawn(async move {
                let mut n = 0i64;
                while Instant::now() < deadline {
                    let jobs = (0..per_call).map(|k| noop::build(n + k as i64));
                    if enqueue_many(&driver, jobs).await.is_ok() {
                        inserted.fetch_add(per_call as u64, Ordering::Relaxed);
                    }
                    n += per_call as i64;
                }
            }));
        }
        for handle in handles {
            handle.await?;
        }
        let jobs = inserted.load(Ordering::Relaxed).max(1) as f64;
        let rate = jobs / seconds as f64;
        let client_us = (cpu_seconds() - cpu0) / jobs * 1e6;
        let machine_us = (machine_busy_seconds() - busy0) / jobs * 1e6;
        println!(
            "{name:<22} {rate:>10.0} jobs/s   ({tasks} tasks, {per_call} per statement, {client_us:.1} µs client CPU and {machine_us:.1} µs machine CPU per job)"
        );
        figures.insert(
            format!("framework_{name}"),
            serde_json::json!({
                "jobs_per_s": rate, "tasks": tasks, "per_statement": per_call,
                "client_cpu_us_per_job": client_us, "machine_cpu_us_per_job": machine_us,
            }),
        );
    }
    // Left behind, the rows would be vacuumed during the next scenario (the ceiling's own
    // database is dropped after it for the same reason).
    admin.reset().await
}
