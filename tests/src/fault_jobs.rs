//! The jobs the fault-injection tests run, shared by the test binaries and the
//! `fault_worker` process they start and kill.

use std::time::Duration;

use jobs_core::{JobContext, job};
use serde::{Deserialize, Serialize};

use crate::any_db::AnyDb;
pub use crate::any_db::RUNS_TABLE;

/// Arguments of [`step`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// How long the job works after recording its run.
    pub work_ms: u64,
}

/// Records that this attempt started (job, attempt, node), then works for a while.
#[job(kind = "fault.step", queue = "faults", max_attempts = 25,
      backoff = exponential(base = "100ms", max = "1s"))]
pub async fn step(ctx: JobContext, args: Step) -> Result<(), jobs_core::Error> {
    let driver = ctx.driver().ok_or_else(|| jobs_core::Error::Pool("no driver".into()))?;
    AnyDb::of(&**driver)
        .record_run(ctx.id(), ctx.attempt(), ctx.node())
        .await
        .map_err(jobs_core::Error::Pool)?;
    // The job's work (a stand-in for an HTTP call): it keeps jobs in flight, so a kill
    // lands mid-batch. No test waits on it; they wait on conditions.
    tokio::time::sleep(Duration::from_millis(args.work_ms)).await;
    Ok(())
}

/// Does nothing: the soak test measures the machinery, not the work.
#[job(kind = "fault.noop", queue = "faults", max_attempts = 25)]
pub async fn noop(_ctx: JobContext) -> Result<(), std::convert::Infallible> {
    Ok(())
}
