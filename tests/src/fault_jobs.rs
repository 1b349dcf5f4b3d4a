//! The jobs the fault-injection tests run, shared by the test binaries and the
//! `fault_worker` process they start and kill.

use std::time::Duration;

use diesel::sql_types::{BigInt, Integer, Text};
use diesel_async::RunQueryDsl;
use jobs_core::{JobContext, job};
use serde::{Deserialize, Serialize};

/// The table `step` writes one row to per attempt it starts.
pub const RUNS_TABLE: &str =
    "CREATE TABLE runs (job_id bigint NOT NULL, attempt int NOT NULL, node text NOT NULL)";

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
    let mut conn = ctx.conn().await?;
    diesel::sql_query("INSERT INTO runs (job_id, attempt, node) VALUES ($1, $2, $3)")
        .bind::<BigInt, _>(ctx.id())
        .bind::<Integer, _>(ctx.attempt())
        .bind::<Text, _>(ctx.node())
        .execute(&mut conn)
        .await?;
    drop(conn);
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
