//! Test support (feature `testing`): helpers for asserting on and running jobs in your own
//! tests, and (with the `postgres` feature) a throwaway Postgres and a database per test.
//!
//! ```
//! use jobs_core::testing::{Expected, TestDatabase, assert_enqueued, drain_queue};
//! use jobs_core::{JobContext, JobState, job};
//!
//! #[job(queue = "mailers")]
//! async fn send_welcome(_ctx: JobContext, user_id: i64) -> Result<String, std::io::Error> {
//!     Ok(format!("welcomed {user_id}"))
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let db = TestDatabase::new().await?; // a fresh migrated database for this test
//! let pool = db.pool(4)?;
//! send_welcome::enqueue(&pool, 7).await?; // what your code under test would do
//!
//! assert_enqueued(&pool, &Expected::job::<send_welcome>().args(7).queue("mailers")).await;
//! let ran = drain_queue(&pool, "mailers").await?;
//! assert_eq!(ran[0].state, JobState::Completed);
//! assert_eq!(ran[0].result, Some(serde_json::json!("welcomed 7")));
//! # Ok(())
//! # }
//! ```

mod assertions;
mod inline;
mod job_context;
mod perform;
mod waiting;

#[allow(
    unused_imports,
    unreachable_pub,
    reason = "the throwaway servers of the drivers of the build; a build may have none"
)]
pub use crate::drivers::testing::*;
pub use assertions::{Expected, assert_enqueued, refute_enqueued};
pub use inline::{InlineDriver, inline, inline_with};
pub use job_context::{job_context, job_context_with};
pub use perform::{drain_queue, drain_queue_with, perform_job, perform_job_with};
pub use waiting::wait_for;

/// Installs the worker's panic hook now (it records a handler's backtrace; a worker
/// installs it when it starts), so that a test harness that sets a panic hook of its own
/// installs it after this one, never at the same moment (`take_hook` and `set_hook` are
/// two steps: two installs at once lose one). Idempotent.
#[doc(hidden)]
pub fn install_panic_capture() {
    crate::worker::panic_capture::install_hook();
}
