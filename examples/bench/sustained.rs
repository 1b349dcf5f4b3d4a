//! Sustained: millions of jobs through one table, throughput per million, to show any
//! decay from bloat. Completed jobs are kept for a retention period and then pruned, as in
//! a deployment; with no retention they all stay and the table grows by every job.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jobs_core::maintenance::PrunerConfig;
use jobs_core::{Worker, enqueue_many};

use crate::jobs::{DONE, noop, registry};
use crate::measure::{BenchResult, Figures, reset};

/// Works `total` jobs with one worker of `concurrency` slots while keeping a backlog of up
/// to 200,000 (enqueued 10,000 per statement in this process). The worker's pruner deletes
/// completed jobs older than `retention` (checking every tenth of it); `None` keeps them.
pub(crate) async fn run(
    url: &str,
    total: usize,
    concurrency: usize,
    retention: Option<Duration>,
    figures: &mut Figures,
) -> BenchResult {
    let admin = jobs_core::postgres::pool(url, 4)?;
    reset(&admin).await?;
    let pruner = PrunerConfig {
        completed: retention,
        interval: retention.map_or(Duration::from_secs(60), |r| (r / 10).max(Duration::from_secs(1))),
        ..PrunerConfig::default()
    };
    let worker = Worker::builder(jobs_core::postgres::pool(url, 8)?)
        .queue("bench", concurrency)
        .registry(registry()?)
        .pruner(pruner)
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
    let kept = match retention {
        Some(r) => format!("completed jobs kept {} s", r.as_secs()),
        None => "completed jobs all kept".to_owned(),
    };
    println!(
        "{:<22} first million {first:.0} jobs/s, last {last:.0} jobs/s ({:+.1} %; {kept})",
        "sustained",
        (last / first - 1.0) * 100.0
    );
    figures.insert(
        "framework_sustained".into(),
        serde_json::json!({
            "jobs_per_s_per_million": per_million,
            "retention_s": retention.map(|r| r.as_secs()),
        }),
    );
    Ok(())
}
