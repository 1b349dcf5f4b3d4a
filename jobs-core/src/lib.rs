//! Database-backed background jobs for diesel and tokio: define a job with `#[job]`,
//! enqueue it inside the same transaction as your own writes, and run it on workers that
//! claim with `FOR UPDATE SKIP LOCKED` (or the backend's equivalent), retry with backoff,
//! time out, and never lose a job to a crashed node.
//!
//! The engine reaches the database only through a [`driver::Driver`]; with the default
//! `postgres` feature, [`PgDriver`] (a `Pool` is accepted wherever a driver is).
//!
//! ```
//! use std::time::Duration;
//! use diesel_async::AsyncConnection;
//! use jobs_core::{job, JobContext, JobState, Worker};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Welcome {
//!     user_id: i64,
//! }
//!
//! #[job(queue = "mailers", max_attempts = 5, timeout = "30s")]
//! async fn send_welcome(ctx: JobContext, args: Welcome) -> Result<String, std::io::Error> {
//!     Ok(format!("welcomed user {} on attempt {}", args.user_id, ctx.attempt()))
//! }
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A throwaway database for the example; in an app, `jobs_core::postgres::pool(url, n)`
//! // after `jobs_core::migrate(jobs_core::postgres::connect(url).await?)`.
//! let db = jobs_core::testing::TestDatabase::new().await?;
//! let pool = db.pool(8)?;
//!
//! // Enqueue inside your own transaction: roll back, and the job never existed.
//! let mut conn = db.connect().await?;
//! let enqueued = conn
//!     .transaction(async |tx| send_welcome::enqueue(&mut *tx, Welcome { user_id: 7 }).await)
//!     .await?;
//!
//! // Run it.
//! let worker = Worker::builder(pool.clone()).queue("mailers", 10).build()?.start().await?;
//! loop {
//!     let row = jobs_core::get_job(&mut conn, enqueued.id).await?.expect("the job");
//!     if row.state == JobState::Completed {
//!         assert_eq!(row.result, Some(serde_json::json!("welcomed user 7 on attempt 1")));
//!         break;
//!     }
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//! }
//! worker.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//!
//! ## Features
//!
//! - `postgres` (default): the Postgres driver, as `jobs_core::postgres`.
//! - `sqlite`: the SQLite driver (SQLite compiled in), as `jobs_core::sqlite`.
//! - `mysql`: the MariaDB / MySQL driver (pure Rust), as `jobs_core::mysql`.
//! - `all-drivers`: the three above.
//! - `testing`: [`testing`], helpers for your own tests (with `postgres`, a
//!   throwaway Postgres and a database per test).
//! - `opentelemetry`: each enqueue stores its W3C trace context in the job, and the run
//!   continues that trace on whichever node runs it (`jobs_core::telemetry`).
//!
//! See `docs/ARCHITECTURE.md` for the path a job takes, and [`job`] for the attribute's
//! options.

#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as jobs_core;

mod backend;
mod backoff;
mod batch;
pub mod clock;
mod control;
pub mod cron;
mod data;
mod drivers;
mod enqueue;
mod error;
mod into_driver;
mod job;
mod job_context;
pub mod maintenance;
pub mod metrics;
pub mod middleware;
pub mod migrate;
mod options;
mod outcome;
mod published;
mod registry;
mod retry_pause;
pub mod settings;
#[cfg(feature = "opentelemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
pub mod telemetry;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod unique;
mod worker;
mod workflow;

pub use async_trait::async_trait;
pub use backend::JobsBackend;
pub use backoff::Backoff;
pub use batch::{Batch, BatchCounts, BatchId, EnqueuedBatch};
pub use clock::{Clock, ManualClock, SystemClock};
pub use control::{
    Action, Applied, QueueLimits, cancel_job, delete_job, retry_job, set_queue_limits, set_queue_paused,
};
pub use data::{AppData, Data, FromAppData, Need};
pub use drivers::*;
pub use enqueue::{
    EnqueueRequest, Enqueued, Enqueuer, IntoNewJob, JobExt, KindRequest, enqueue_many, enqueue_many_sync,
    validate_queue,
};
pub use error::{Error, Result};
pub use into_driver::IntoDriver;
pub use job::Job;
pub use job_context::{ContextParts, JobContext};
pub use jobs_driver as driver;
pub use jobs_driver::validation::MAX_PAYLOAD_BYTES;
pub use jobs_driver::{Count, Inserted, JobFilter, JobRow, JobState, NewJob, ParseStateError, stored_text};
pub use jobs_driver::{DependsOn, OnFailure};
pub use jobs_macros::job;
pub use migrate::migrate;
pub use options::{DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobOptions, PartitionBy};
pub use outcome::{Failure, HandlerReturn, IntoOutcome, Outcome, RunOutcome};
pub use registry::{CronAttribute, JobDescriptor, MissedPolicy, Registry, RunFn};
pub use unique::{UniqueBy, UniqueOptions};
pub use worker::{
    Drained, QueueConfig, ShutdownReport, UnknownKindPolicy, Worker, WorkerBuilder, WorkerHandle,
};
pub use workflow::{EnqueuedWorkflow, Step, Workflow};

/// Loads job `id` on a connection of the application's own (in its transaction, if any).
pub async fn get_job<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
where
    C: diesel_async::AsyncConnectionCore + Send,
    C::Backend: JobsBackend,
{
    Ok(<<C::Backend as JobsBackend>::Driver as jobs_driver::ConnectionDriver>::get(conn, id).await?)
}

/// Re-exports for the code `#[job]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use diesel;
    pub use inventory;
    pub use serde_json;

    /// What a `#[job]` run says when called (`Job::run`) on a context without the
    /// application's values it needs, which a worker and the registry check first.
    pub fn missing_data(kind: &str, needs: &[crate::Need]) -> String {
        let names: Vec<&str> = needs.iter().map(crate::Need::type_name).collect();
        format!(
            "job `{kind}` needs the application's {} but its context lacks one: run it through a \
             worker built with `.data(value)`, `testing::inline_with` or `testing::job_context_with`",
            names.join(", ")
        )
    }
}
