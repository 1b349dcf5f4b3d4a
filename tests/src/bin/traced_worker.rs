//! A worker process for the trace test: runs the `traced` queue of the database at `--url`
//! until job `--job` has completed, then prints every span it recorded, one JSON line each
//! (after the line `spans:`), and exits.

use std::time::Duration;

use clap::Parser;
use jobs_core::driver::JobGetParams;
use jobs_core::testing::wait_for;
use jobs_core::{JobState, Registry, Worker};
use jobs_tests::traced::{Spans, traced_hello};

#[derive(Debug, Parser)]
struct Args {
    /// The database.
    #[arg(long)]
    url: String,
    /// The job to wait for.
    #[arg(long)]
    job: i64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let spans = Spans::install("traced-worker");
    let driver = jobs_core::driver_for_url(&args.url, 4)?;
    let registry = Registry::new().with::<traced_hello>()?;
    let worker = Worker::builder(driver.clone())
        .registry(registry)
        .queue("traced", 2)
        .poll_interval(Duration::from_millis(50))
        .build()?
        .start()
        .await?;
    wait_for("the traced job to complete", Duration::from_secs(60), || async {
        let row = driver.job_get(JobGetParams { id: args.job }).await.ok()??;
        (row.state == JobState::Completed).then_some(())
    })
    .await;
    worker.shutdown().await?;
    println!("spans:");
    for span in spans.finished() {
        println!("{}", serde_json::to_string(&span)?);
    }
    Ok(())
}
