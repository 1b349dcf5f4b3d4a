//! Waiting in tests on a condition with a deadline, never for a fixed time.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some` (returned), or fails the test after `deadline`,
/// naming `what` it waited for. Polls quickly at first, then every 50 ms.
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
