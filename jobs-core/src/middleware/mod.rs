//! Code of the application's around every enqueue and every run: set a tenant id around
//! each job, copy a request id or a trace context into the jobs a request enqueues, report
//! failed attempts to an error tracker, refuse a run.
//!
//! - **Insert middleware** ([`InsertMiddleware`]) sees each job before it is written, and
//!   may change it or refuse it, then sees what the insert did. It runs on every enqueue
//!   of the process (typed or by kind, one or many, async or on a synchronous connection,
//!   workflow steps, batch members and callbacks, cron slots and "run now"; `after_insert`
//!   not for cron slots, which the schedule's own statement inserts), inside the caller's
//!   transaction: a refusal writes nothing and leaves the transaction usable. A refused
//!   cron slot is skipped. The uniqueness key's hash and the partition key are derived
//!   from the request before it runs: changing the arguments or the queue does not move
//!   them. Registered
//!   once for the process with [`add_insert_middleware`], as a metrics recorder or a
//!   tracing subscriber is: enqueues are free functions on the caller's connection, so
//!   there is no client object to hang it on.
//! - **Run middleware** ([`RunMiddleware`]) wraps each run on a worker: it sees the job
//!   before its handler, calls [`Next::run`] to go on (or does not, and the handler never
//!   runs), and sees and may change the outcome. Registered on the worker builder
//!   ([`WorkerBuilder::middleware`](crate::WorkerBuilder::middleware)).
//!
//! **Order.** Insert middleware's `before_insert` runs in registration order, each job in
//! turn; `after_insert` in the reverse order. Run middleware nests: the first registered is
//! the outermost, so it sees the job first and the outcome last. With none registered
//! nothing is added to an enqueue or a run.
//!
//! **Failures.** A `before_insert` error fails the enqueue with
//! [`Error::InsertRefused`](crate::Error::InsertRefused) (a changed job is checked again,
//! as a typed request is). A run middleware that returns a [`RunOutcome`](crate::RunOutcome) without calling
//! [`Next::run`] ends the attempt with it (`RunOutcome::Failed` retries it as a handler's
//! error would); a panic in one fails the attempt as a handler's panic does. The handler's
//! timeout covers the handler only; a cancel or a shutdown stops the middleware too (a
//! handler that had ended keeps its outcome). Middleware time counts towards the
//! rescuer's deadline for a running job (its timeout plus the grace, 5 s by default): a
//! middleware that takes longer gets the job run again elsewhere. Keep it quick; send
//! reports from another task. `testing::inline` runs no run middleware.
//!
//! ```no_run
//! use jobs_core::driver::{Inserted, NewJob};
//! use jobs_core::middleware::{BoxError, InsertMiddleware, JobRun, Next, RunMiddleware};
//! use jobs_core::{RunOutcome, Worker};
//!
//! tokio::task_local! { static TENANT: String; }
//!
//! /// Stamps every job with the tenant of the request that enqueues it.
//! struct StampTenant;
//!
//! impl InsertMiddleware for StampTenant {
//!     fn before_insert(&self, job: &mut NewJob) -> Result<(), BoxError> {
//!         // Jobs enqueued outside a request (cron slots, scripts) go as they are.
//!         if let Ok(tenant) = TENANT.try_with(Clone::clone) {
//!             job.set_meta("tenant", tenant)?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! /// Runs every job with its tenant set, as the request that enqueued it had.
//! struct WithTenant;
//!
//! #[jobs_core::async_trait]
//! impl RunMiddleware for WithTenant {
//!     async fn run(&self, job: &JobRun<'_>, next: Next<'_>) -> RunOutcome {
//!         let tenant = job.context.meta_value("tenant");
//!         match tenant.as_ref().and_then(|t| t.as_str()) {
//!             Some(tenant) => TENANT.scope(tenant.to_owned(), next.run()).await,
//!             None => next.run().await,
//!         }
//!     }
//! }
//!
//! # async fn demo(pool: jobs_core::postgres::Pool) -> jobs_core::Result<()> {
//! jobs_core::middleware::add_insert_middleware(StampTenant);
//! let worker = Worker::builder(pool).queue("default", 10).middleware(WithTenant).build()?;
//! # let _ = worker; Ok(()) }
//! ```

mod insert;
mod run;

pub use crate::error::BoxError;
pub(crate) use insert::InsertChain;
pub use insert::{InsertMiddleware, add_insert_middleware};
pub(crate) use run::RunChain;
pub use run::{JobRun, Next, RunMiddleware};
