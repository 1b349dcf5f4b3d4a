//! Sustained: millions of jobs through one table, throughput per million, to show any
//! decay from bloat.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jobs_core::{Worker, enqueue_many};

use crate::jobs::{DONE, noop, registry};
use crate::measure::{BenchResult, Figures, reset};

/// Works `total` jobs with one worker of `concurrency` slots while keeping a backlog of up
/// to 200,000 (enqueued 10,000 per statement in this process).
pub(crate) async fn run(url: &str, total: usize, concurrency: usize, figures: &mut Figures) -> BenchResult {
    let admin = jobs_core::db::pool(url, 4)?;
    reset(&admin).await?;
    let worker = Worker::builder(jobs_core::db::pool(url, 8)?)
        .queue("bench", concurrency)
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
    while (DONE.load(Ordering::Relaxed) as usize) < total {
        let done = DONE.load(Ordering::Relaxed) as usize;
        if enqueued < total && enqueued - done < 200_000 {
            let batch = (total - enqueued).min(10_000);
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
