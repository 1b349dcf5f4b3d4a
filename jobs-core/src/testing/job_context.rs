//! Contexts for calling a job's handler directly in a test, without a worker.

use std::sync::Arc;

use jobs_driver::Driver;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::data::AppData;
use crate::job::Job;
use crate::job_context::{ContextParts, JobContext};

/// A context for running `J`'s handler inline (`send_welcome::call(ctx, args)`): job id 0,
/// first of `J`'s attempts, empty metadata, the given driver (if any) for the handler's
/// own queries, no application values (see [`job_context_with`]).
pub fn job_context<J: Job>(driver: Option<Arc<dyn Driver>>) -> JobContext {
    job_context_with::<J>(driver, AppData::new())
}

/// [`job_context`] with the application's values `data` (what `ctx.data::<T>()` reads).
pub fn job_context_with<J: Job>(driver: Option<Arc<dyn Driver>>, data: AppData) -> JobContext {
    let options = J::options();
    let meta = RawValue::from_string("{}".to_owned()).unwrap_or_default();
    JobContext::new(ContextParts {
        id: 0,
        kind: J::KIND,
        queue: Arc::from(options.queue.as_ref()),
        attempt: 1,
        max_attempts: options.max_attempts,
        priority: options.priority,
        meta,
        tags: options.tags.iter().map(|t| t.to_string()).collect(),
        node: Arc::from("test"),
        created_at: chrono::Utc::now(),
        cancel: CancellationToken::new(),
        driver,
        data,
    })
}
