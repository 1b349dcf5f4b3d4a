//! Shared helpers for the end-to-end tests, and the jobs of the fault-injection tests.

pub mod fault_jobs;
pub mod faults;
pub mod processes;

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some`, or fails the test after `deadline`.
///
/// Tests wait on conditions, never for a fixed time.
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < deadline, "timed out after {deadline:?} waiting for {what}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}
