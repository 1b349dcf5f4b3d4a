//! The jobs the scenarios run, registered in every benchmark process.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use jobs_core::{JobContext, Registry, job};

/// Jobs finished in this process (`noop`).
pub(crate) static DONE: AtomicU64 = AtomicU64::new(0);

/// Enqueue-to-start latencies in milliseconds (`pickup`).
pub(crate) static LATENCIES: Mutex<Vec<f64>> = Mutex::new(Vec::new());

/// How long each `noop` takes in this process, ms (`--job-ms`; 0: no wait).
pub(crate) static JOB_MS: AtomicU64 = AtomicU64::new(0);

/// Does nothing (or waits `JOB_MS`, as a call to another service would): the burn-down
/// measures the framework, not the job.
#[job(kind = "bench.noop", queue = "bench")]
pub(crate) async fn noop(_ctx: JobContext, _n: i64) -> Result<(), std::convert::Infallible> {
    let ms = JOB_MS.load(Ordering::Relaxed);
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    DONE.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Records how long after its enqueue it started.
#[job(kind = "bench.pickup", queue = "latency")]
pub(crate) async fn pickup(ctx: JobContext) -> Result<(), std::convert::Infallible> {
    let waited = (chrono::Utc::now() - ctx.created_at()).num_microseconds().unwrap_or(0) as f64 / 1000.0;
    LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).push(waited);
    Ok(())
}

/// Sleeps until cancelled: the memory scenario holds 1,000 of them.
#[job(kind = "bench.sleep", queue = "sleepy")]
pub(crate) async fn sleepy(ctx: JobContext) -> Result<(), std::convert::Infallible> {
    ctx.cancelled().await;
    Ok(())
}

/// The benchmark's jobs.
pub(crate) fn registry() -> Result<Registry, jobs_core::Error> {
    Registry::new().with::<noop>()?.with::<pickup>()?.with::<sleepy>()
}
