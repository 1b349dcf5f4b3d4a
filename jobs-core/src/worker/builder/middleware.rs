//! Wrapping every run in the application's code ([`WorkerBuilder::middleware`]).

use std::sync::Arc;

use super::WorkerBuilder;
use crate::middleware::RunMiddleware;

impl WorkerBuilder {
    /// Runs every job of this worker through `middleware` (see
    /// [`middleware`](crate::middleware)). Each call adds one inside those added before:
    /// the first added sees each job first and its outcome last.
    ///
    /// ```no_run
    /// use jobs_core::middleware::{JobRun, Next, RunMiddleware};
    /// use jobs_core::RunOutcome;
    ///
    /// /// Logs each failed attempt with its job.
    /// struct LogFailures;
    ///
    /// #[jobs_core::async_trait]
    /// impl RunMiddleware for LogFailures {
    ///     async fn run(&self, job: &JobRun<'_>, next: Next<'_>) -> RunOutcome {
    ///         let outcome = next.run().await;
    ///         if let RunOutcome::Failed(failure) = &outcome {
    ///             eprintln!("job {} ({}) attempt {}: {}", job.context.id(), job.context.kind(),
    ///                       job.context.attempt(), failure.message);
    ///         }
    ///         outcome
    ///     }
    /// }
    ///
    /// # fn demo(pool: jobs_core::postgres::Pool) -> jobs_core::Result<()> {
    /// let worker = jobs_core::Worker::builder(pool).queue("default", 10).middleware(LogFailures).build()?;
    /// # let _ = worker; Ok(()) }
    /// ```
    pub fn middleware(mut self, middleware: impl RunMiddleware) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }
}
