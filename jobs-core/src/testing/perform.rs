//! Running jobs in users' tests: [`perform_job`] (one handler, inline) and
//! [`drain_queue`] (everything due on a queue, through the real worker path).

use std::sync::Arc;

use jobs_driver::Driver;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::into_driver::IntoDriver;
use crate::job::Job;
use crate::outcome::RunOutcome;
use crate::registry::JobDescriptor;
use crate::worker::{Drained, Worker};

use super::job_context::job_context_with;
use crate::data::AppData;

/// Runs `J`'s handler once, inline, with `args` round-tripped through JSON as a worker
/// would see them, and a real context (`driver`'s pool for the handler's own queries:
/// `Some(pool.into_driver())`). Returns the outcome: completed with its result, failed,
/// snoozed, cancelled or discarded.
pub async fn perform_job<J: Job>(driver: Option<Arc<dyn Driver>>, args: J::Args) -> Result<RunOutcome> {
    perform_job_with::<J>(driver, AppData::new(), args).await
}

/// [`perform_job`], the handler given the application's values `data` (its `Data<T>`
/// parameters). A value it needs and `data` lacks fails the run (`missing_data`), as on a
/// worker.
pub async fn perform_job_with<J: Job>(
    driver: Option<Arc<dyn Driver>>,
    data: AppData,
    args: J::Args,
) -> Result<RunOutcome> {
    let encoded = serde_json::to_string(&args)
        .and_then(RawValue::from_string)
        .map_err(|source| Error::EncodeArgs { kind: J::KIND.to_owned(), source })?;
    let descriptor = JobDescriptor::of::<J>();
    Ok((descriptor.run)(job_context_with::<J>(driver, data), &encoded).await)
}

/// Runs every job on `queue` that is due now, one at a time, through the same code a
/// worker uses (outcomes written, retries scheduled), until none is left; returns what
/// ran. Uses every job registered in the binary. See [`Worker::drain`].
pub async fn drain_queue(driver: impl IntoDriver, queue: &str) -> Result<Vec<Drained>> {
    drain_queue_with(driver, AppData::new(), queue).await
}

/// [`drain_queue`] on a worker given the application's values `data`
/// ([`WorkerBuilder::data`](crate::WorkerBuilder::data)).
pub async fn drain_queue_with(driver: impl IntoDriver, data: AppData, queue: &str) -> Result<Vec<Drained>> {
    Worker::builder(driver)
        .app_data(data)
        .check_data_per_run()
        .queue(queue, 1)
        .node_name(format!("drain-{queue}-{:08x}", rand::random::<u32>()))
        .without_maintenance()
        .listen(false)
        .build()?
        .drain()
        .await
}
