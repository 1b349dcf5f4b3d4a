//! Pickup latency: a producer enqueues at a fixed rate; each job records how long after
//! its insert it started.

use std::time::Duration;

use jobs_core::Worker;

use crate::jobs::{LATENCIES, pickup, registry};
use crate::measure::{BenchResult, Figures, percentile};
use crate::target::Admin;

/// Enqueues `rate` jobs a second for `seconds`, one statement each, and reports the
/// enqueue → handler start latency.
pub(crate) async fn run(url: &str, rate: u64, seconds: u64, figures: &mut Figures) -> BenchResult {
    let admin = Admin::open(url, 8)?;
    admin.reset().await?;
    LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let worker = Worker::builder(admin.driver.clone())
        .queue("latency", 50)
        .registry(registry()?)
        .build()?
        .start()
        .await?;
    while !worker.is_listening() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let total = rate * seconds;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    for _ in 0..total {
        ticker.tick().await;
        pickup::enqueue(&admin.driver, ()).await?;
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
        "pickup_latency", rate, seconds
    );
    figures.insert(
        "framework_pickup_latency".into(),
        serde_json::json!({ "rate": rate, "p50_ms": p50, "p99_ms": p99, "max_ms": max }),
    );
    Ok(())
}
