//! Memory: the worker's resident size with 1,000 jobs running at once (each sleeps until
//! cancelled).

use std::time::Duration;

use jobs_core::{Worker, enqueue_many};

use crate::jobs::{registry, sleepy};
use crate::measure::{BenchResult, Figures, rss_mb};
use crate::target::Admin;

/// Runs 1,000 sleeping jobs and reports this process's RSS.
pub(crate) async fn run(url: &str, figures: &mut Figures) -> BenchResult {
    let admin = Admin::open(url, 8)?;
    admin.reset().await?;
    let before = rss_mb();
    let worker = Worker::builder(admin.driver.clone())
        .queue("sleepy", 1_000)
        .registry(registry()?)
        .build()?
        .start()
        .await?;
    enqueue_many(&admin.driver, (0..1_000).map(|_| sleepy::build(()))).await?;
    while worker.running() < 1_000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rss = rss_mb();
    jobs_core::Action::Cancel
        .apply_to_matching(&*admin.driver, &jobs_core::JobFilter::default(), 1_000)
        .await?;
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
