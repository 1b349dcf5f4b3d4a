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

/// Records this run in the `runs` table. An attempt must not fail for the test's own
/// bookkeeping (SQLite's write lock busy past its timeout, a connection the restarted
/// server closed): the record is tried again for up to 30 s, under one run number, so
/// that a record whose reply was lost (but which was written) is not counted twice.
async fn record(ctx: &JobContext) -> Result<(), jobs_core::Error> {
    let driver = ctx.driver().ok_or_else(|| jobs_core::Error::Pool("no driver".into()))?;
    let db = AnyDb::of(&**driver);
    let run_id: i64 = rand::random();
    let mut tries = 0;
    loop {
        match db.record_run(ctx.id(), ctx.attempt(), ctx.node(), run_id).await {
            Ok(true) => return Ok(()),
            Ok(false) => {
                tracing::warn!(
                    job.id = ctx.id(),
                    attempt = ctx.attempt(),
                    "the run's record was written before, its reply lost"
                );
                return Ok(());
            }
            Err(e) => {
                tries += 1;
                if tries == 300 {
                    return Err(jobs_core::Error::Pool(e));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Records that this attempt started (job, attempt, node), then works for a while.
#[job(kind = "fault.step", queue = "faults", max_attempts = 25,
      backoff = exponential(base = "100ms", max = "1s"))]
pub async fn step(ctx: JobContext, args: Step) -> Result<(), jobs_core::Error> {
    record(&ctx).await?;
    // The job's work (a stand-in for an HTTP call): it keeps jobs in flight, so a kill
    // lands mid-batch. No test waits on it; they wait on conditions.
    tokio::time::sleep(Duration::from_millis(args.work_ms)).await;
    Ok(())
}

/// [`step`] with a single attempt (`max_attempts = 1`): a job that must not fail, whose
/// node may die under it. The kill loop runs it.
#[job(kind = "fault.once", queue = "faults", max_attempts = 1)]
pub async fn once(ctx: JobContext, args: Step) -> Result<(), jobs_core::Error> {
    record(&ctx).await?;
    tokio::time::sleep(Duration::from_millis(args.work_ms)).await;
    Ok(())
}

/// Does nothing: the soak test measures the machinery, not the work.
#[job(kind = "fault.noop", queue = "faults", max_attempts = 25)]
pub async fn noop(_ctx: JobContext) -> Result<(), std::convert::Infallible> {
    Ok(())
}

/// Arguments of [`batch_done`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchDone {
    /// How many members the batch has.
    pub members: u64,
}

/// A batch's callback: records its run, then checks that every member completed (an
/// error, with the counts in its message, otherwise).
#[job(kind = "fault.batch_done", queue = "faults", max_attempts = 25)]
pub async fn batch_done(ctx: JobContext, args: BatchDone) -> Result<(), jobs_core::Error> {
    record(&ctx).await?;
    let counts = ctx.batch_counts().await?;
    if counts.completed != args.members || counts.discarded + counts.cancelled > 0 {
        return Err(jobs_core::Error::Runtime(format!("wrong batch counts: {counts:?} of {}", args.members)));
    }
    Ok(())
}
