//! Postgres-backed background jobs for diesel and tokio.
//!
//! (Crate docs are completed with the worker.)

#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as jobs_core;

mod backoff;
pub mod clock;
mod context;
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
#[cfg(feature = "testing")]
pub mod testing;
mod unique;
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
pub use worker::{QueueConfig, ShutdownReport, Worker, WorkerBuilder, WorkerHandle};

/// Re-exports for the code `#[job]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use diesel;
    pub use inventory;
    pub use serde_json;
}
