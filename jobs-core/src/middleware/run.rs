//! Run middleware: what wraps a run, and how a run goes through the chain.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::value::RawValue;

use crate::job_context::JobContext;
use crate::outcome::RunOutcome;

/// A job about to run, as run middleware sees it.
#[derive(Debug, Clone, Copy)]
pub struct JobRun<'a> {
    /// The context its handler gets: id, kind, queue, attempt, metadata, tags, the
    /// application's values.
    pub context: &'a JobContext,
    /// Its stored arguments, not yet decoded.
    pub args: &'a RawValue,
}

/// Code around every run of a worker (see the [module docs](super)). Implement it with
/// [`async_trait`](crate::async_trait).
#[async_trait::async_trait]
pub trait RunMiddleware: Send + Sync + 'static {
    /// Runs around `job`'s run: call `next.run().await` to run the rest of the chain and the
    /// handler, and return their outcome, changed or not; return without calling it and the
    /// handler does not run, the attempt ending with what this returns.
    async fn run(&self, job: &JobRun<'_>, next: Next<'_>) -> RunOutcome;
}

/// A worker's run middleware, outermost first.
pub(crate) type RunChain = Arc<[Arc<dyn RunMiddleware>]>;

/// The rest of the chain and the handler, which [`RunMiddleware::run`] goes on to.
pub struct Next<'a> {
    rest: &'a [Arc<dyn RunMiddleware>],
    job: &'a JobRun<'a>,
    handler: BoxFuture<'a, RunOutcome>,
}

impl<'a> Next<'a> {
    /// `job` through `chain`, then `handler` (which starts only when the innermost
    /// middleware goes on).
    pub(crate) fn new(
        chain: &'a [Arc<dyn RunMiddleware>],
        job: &'a JobRun<'a>,
        handler: BoxFuture<'a, RunOutcome>,
    ) -> Next<'a> {
        Next { rest: chain, job, handler }
    }

    /// Runs the rest of the chain and the handler; their outcome.
    pub async fn run(self) -> RunOutcome {
        match self.rest.split_first() {
            Some((first, rest)) => {
                first.run(self.job, Next { rest, job: self.job, handler: self.handler }).await
            }
            None => self.handler.await,
        }
    }
}

impl std::fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next").field("middleware_left", &self.rest.len()).finish_non_exhaustive()
    }
}
