//! Pickup latency: a producer enqueues at a fixed rate; each job records how long after
//! its insert it started. The producer enqueues through the worker's own driver
//! (`latency`: on SQLite its wake-up reaches the worker in-process), or on a connection of
//! its own, as another process would (`latency-other-process`: on SQLite the worker learns
//! of it from `job_notifications`; on Postgres, NOTIFY either way).

use std::time::Duration;

use jobs_core::Worker;

use crate::jobs::{LATENCIES, pickup, registry};
use crate::measure::{BenchResult, Figures, percentile};
use crate::target::Admin;

/// Where the producer enqueues.
enum Producer {
    /// The worker's driver.
    Driver(std::sync::Arc<dyn jobs_core::driver::Driver>),
    /// A Postgres connection of its own.
    Postgres(Box<diesel_async::AsyncPgConnection>),
    /// A SQLite connection of its own.
    Sqlite(jobs_core::sqlite::AsyncSqliteConnection),
    /// A MariaDB/MySQL connection of its own.
    Mysql(Box<diesel_async::AsyncMysqlConnection>),
}

impl Producer {
    async fn enqueue(&mut self) -> BenchResult {
        match self {
            Producer::Driver(driver) => pickup::enqueue(&*driver, ()).await?,
            Producer::Postgres(conn) => pickup::enqueue(&mut **conn, ()).await?,
            Producer::Sqlite(conn) => pickup::enqueue(conn, ()).await?,
            Producer::Mysql(conn) => pickup::enqueue(&mut **conn, ()).await?,
        };
        Ok(())
    }
}

/// Enqueues `rate` jobs a second for `seconds`, one statement each (through the worker's
/// driver, or on a connection of the producer's own when `own_connection`), and reports
/// the enqueue → handler start latency.
pub(crate) async fn run(
    url: &str,
    rate: u64,
    seconds: u64,
    own_connection: bool,
    figures: &mut Figures,
) -> BenchResult {
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
    let mut producer = if !own_connection {
        Producer::Driver(admin.driver.clone())
    } else if url.starts_with("sqlite:") {
        Producer::Sqlite(jobs_core::sqlite::connect(url).await?)
    } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        Producer::Mysql(Box::new(jobs_core::mysql::connect(url).await?))
    } else {
        Producer::Postgres(Box::new(jobs_core::postgres::connect(url).await?))
    };
    let total = rate * seconds;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    for _ in 0..total {
        ticker.tick().await;
        producer.enqueue().await?;
    }
    while (LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).len() as u64) < total {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.shutdown().await?;
    let mut samples = LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).clone();
    samples.sort_by(f64::total_cmp);
    let (p50, p99, max) =
        (percentile(&samples, 0.5), percentile(&samples, 0.99), samples.last().copied().unwrap_or(0.0));
    let name = if own_connection { "pickup_latency_other_process" } else { "pickup_latency" };
    println!(
        "{name:<22} p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms   ({rate} jobs/s for {seconds} s)"
    );
    figures.insert(
        format!("framework_{name}"),
        serde_json::json!({ "rate": rate, "p50_ms": p50, "p99_ms": p99, "max_ms": max }),
    );
    Ok(())
}
