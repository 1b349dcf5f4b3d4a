//! The shop's jobs in a process of their own: the same job library as the web app, no web
//! server. Run as many as you like beside `shop` (with `SHOP_WORKER=off`, or not).
//!
//!     DATABASE_URL=sqlite:///tmp/jobs-shop-demo.db cargo run -p jobs-examples --bin shop-worker
//!     DATABASE_URL=postgres://... cargo run -p jobs-examples --bin shop-worker
//!
//! `shop` prints the `DATABASE_URL` of the database it starts. Ctrl-C
//! (or SIGTERM) shuts down gracefully: running jobs finish within 30 s or are handed back
//! to the queue for another worker.

use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("error: set DATABASE_URL to the shop's database (`shop` prints it when it starts one)");
        std::process::exit(2);
    };
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new("info")).init();
    // Every job in the shop's library is registered through `#[job]`; naming the library
    // links it in.
    let driver = jobs_core::driver_for_url(&url, 20)?;
    let worker = jobs_examples::worker(driver).build()?;
    println!("shop-worker {} running the shop's queues; Ctrl-C to stop", worker.node());
    let mut terminate = signal(SignalKind::terminate())?;
    let report = worker
        .run_until(async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        })
        .await?;
    println!("shop-worker stopped cleanly ({} jobs handed back)", report.handed_back);
    Ok(())
}
