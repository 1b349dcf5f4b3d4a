//! Postgres-backed background jobs for diesel and tokio: define a job with `#[job]`,
//! enqueue it inside the same transaction as your own writes, and run it on workers that
//! claim with `FOR UPDATE SKIP LOCKED`, retry with backoff, time out, and never lose a job
//! to a crashed node.
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
//! // A throwaway database for the example; in an app, `jobs_core::db::pool(url, n)` after
//! // `jobs_core::migrate(jobs_core::db::connect(url).await?)`.
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
//!     let row = jobs_core::db::jobs::get(&mut conn, enqueued.id).await?.expect("the job");
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
//! See `docs/ARCHITECTURE.md` for the path a job takes, and [`job`] for the attribute's
//! options.

#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as jobs_core;

mod backoff;
pub mod clock;
mod context;
pub mod cron;
pub mod db;
mod enqueue;
mod error;
mod job;
pub mod maintenance;
pub mod migrate;
mod options;
mod outcome;
mod registry;
pub mod schema;
mod state;
pub mod stored_text;
#[cfg(feature = "testing")]
pub mod testing;
mod unique;
pub mod wakeups;
mod worker;

pub use backoff::Backoff;
pub use clock::{Clock, ManualClock, SystemClock};
pub use context::{ContextParts, JobContext};
pub use db::Pool;
pub use db::control::{cancel as cancel_job, delete as delete_job, retry as retry_job};
pub use db::queues::set_paused as set_queue_paused;
pub use enqueue::{
    EnqueueRequest, Enqueued, Enqueuer, IntoNewJob, JobExt, MAX_PAYLOAD_BYTES, enqueue_many,
    enqueue_many_sync, validate_queue,
};
pub use error::{Error, Result};
pub use job::Job;
pub use jobs_macros::job;
pub use migrate::migrate;
pub use options::{DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, JobOptions};
pub use outcome::{Failure, HandlerReturn, IntoOutcome, Outcome, RunOutcome};
pub use registry::{CronAttribute, JobDescriptor, MissedPolicy, Registry, RunFn};
pub use state::{JobState, ParseStateError};
pub use unique::{UniqueBy, UniqueOptions};
pub use worker::{
    Drained, QueueConfig, ShutdownReport, UnknownKindPolicy, Worker, WorkerBuilder, WorkerHandle,
};

/// Re-exports for the code `#[job]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use diesel;
    pub use inventory;
    pub use serde_json;
}
