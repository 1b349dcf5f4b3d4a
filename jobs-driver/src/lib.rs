//! The seam between the jobs engine (`jobs-core`) and a database.
//!
//! A backend is a [`Driver`]: one type that owns all of the backend's SQL and performs
//! every operation the engine needs — `job_claim`, `job_complete_many`,
//! `job_rescue_stuck`, `leader_try_acquire`, … — each taking one parameter struct. The
//! engine reaches the database only through it, and adapts to the [`Capabilities`] a
//! driver declares (it polls where there is no `LISTEN`, the dashboard hides search where
//! there is no JSON containment).
//!
//! This crate also holds what engine and drivers exchange: the job states
//! ([`JobState`]), rows ([`NewJob`], [`JobRow`], [`ClaimedJob`], [`Completion`], …), and
//! the rules every row obeys ([`validation`]).
//!
//! ```
//! use jobs_driver::{Capabilities, Capability, JobState, NewJob};
//!
//! // A row the engine hands a driver to insert, checked by the shared rules.
//! let mut job = NewJob::new("app::send_welcome", "mailers", r#"{"user_id": 7}"#);
//! job.validate()?;
//! job.max_attempts = 0;
//! assert!(job.validate().is_err());
//!
//! // What a backend without LISTEN/NOTIFY declares; the engine polls for it.
//! let caps = Capabilities::ALL.without(Capability::ListenNotify);
//! assert!(!caps.has(Capability::ListenNotify) && caps.has(Capability::SkipLocked));
//! assert!(JobState::Completed.is_final());
//! # Ok::<(), jobs_driver::validation::InvalidJob>(())
//! ```
//!
//! ## Features
//!
//! - `postgres`: `JobState` in diesel queries on Postgres (`state_sql`); the Postgres driver
//!   turns it on.
//! - `testing`: `jobs_driver::test_server`, what the drivers' throwaway test servers share.

pub mod cached;
mod capability;
mod connection;
mod driver;
mod error;
mod job;
mod kind_stats;
mod leader;
pub mod limited_claim;
mod node;
mod notification;
pub mod partition;
pub mod polled_listener;
mod queue;
mod queue_limits;
pub mod rows;
mod schedule;
pub mod schema_migrations;
mod server;
#[cfg(feature = "postgres")]
pub mod sql_types;
mod state;
#[cfg(feature = "postgres")]
mod state_sql;
mod stats;
pub mod stored_text;
#[cfg(feature = "testing")]
pub mod test_server;
pub mod validation;
pub mod wake_ration;
pub mod workflow;

pub use async_trait::async_trait;
pub use capability::{Capabilities, Capability, INDEXED_SEARCH_STATES};
pub use connection::{ConnectionDriver, begin_own_transaction, end_own_transaction};
pub use driver::{Driver, HasDriver, Listener};
pub use error::{DriverError, Result, is_transient};
pub use job::*;
pub use kind_stats::{
    DURATION_BUCKETS, Histogram, KindMetric, KindStats, KindStatsCount, KindStatsSum, StatsKindsParams,
    duration_bucket,
};
pub use leader::{LeaderGetParams, LeaderReleaseParams, LeaderTryAcquireParams};
pub use node::{
    NodeDeleteParams, NodeDeleteStaleParams, NodeHeartbeatParams, NodeHold, NodeHoldParams, NodeListParams,
    NodeLock, NodeRow, node_lock_hash,
};
pub use notification::{AVAILABLE_CHANNEL, CONTROL_CHANNEL, Notification};
pub use queue::{
    KeyLoad, LimitsUsage, QueueDepth, QueueIsPausedParams, QueueLimitsUsageParams, QueueListDepthsParams,
    QueueListPausedParams, QueueSetConcurrencyParams, QueueSetLimitsParams, QueueSetPausedParams,
    QueueSettings, QueueSettingsParams,
};
pub use queue_limits::{
    ClaimLimits, DeclaredLimits, MAX_RATE_ALLOWED, MAX_RATE_PERIOD_SECS, RATE_SLOTS, RateLimit, RateWindow,
};
pub use schedule::{
    Fired, ScheduleDef, ScheduleFireDueParams, ScheduleGetParams, ScheduleListParams,
    ScheduleRecordRunParams, ScheduleRow, ScheduleSetEnabledParams, ScheduleSyncParams, SlotDecision,
};
pub use server::{OLDEST_POSTGRES_MAJOR, ServerStatus, ServerStatusParams};
pub use state::{JobState, ParseStateError};
pub use stats::{
    BucketSum, MAX_THROUGHPUT_BUCKETS, StatsCompactParams, StatsCount, StatsPruneParams, StatsRecordParams,
    StatsThroughputParams, Throughput,
};
pub use workflow::{
    BatchChange, BatchChanged, BatchTarget, Dependency, DependsOn, InsertedWorkflow, JobBatchParams,
    JobDependenciesParams, JobInsertWorkflowParams, JobSettleParams, Needs, NewStep, NewWorkflow, OnFailure,
    Settled, WorkflowError, WorkflowGetParams, WorkflowInfo, WorkflowPruneParams, WorkflowPruned,
};
