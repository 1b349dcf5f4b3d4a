//! The Postgres driver of the jobs framework.
//!
//! [`PgDriver`] implements [`jobs_driver::Driver`] on a deadpool [`Pool`] of
//! `diesel-async` connections: every statement the engine runs on Postgres is in this
//! crate (claims with `FOR UPDATE SKIP LOCKED`, fenced batch completions, the rescuer's and
//! the pruner's queries, the dashboard's keyset pages and planner estimates), with the
//! schema's migrations ([`migrate()`]), LISTEN/NOTIFY wake-ups, and the plan tests that keep
//! those statements on their indexes. Its
//! [`ConnectionDriver`](jobs_driver::ConnectionDriver) implementation ([`connection`])
//! holds the operations an application runs on a connection of its own, inside its
//! transaction.
//!
//! ```
//! use jobs_driver::{Capability, Driver, JobGetParams, JobInsertManyParams, JobState, NewJob};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A throwaway migrated database; in an app, `PgDriver::new(jobs_postgres::pool(url, 16)?)`.
//! let db = jobs_postgres::testing::TestDatabase::new().await?;
//! let driver = db.driver(4)?;
//! assert!(driver.capabilities().has(Capability::ListenNotify));
//!
//! let job = NewJob::new("app::send_welcome", "mailers", r#"{"user_id": 7}"#);
//! let inserted = driver.job_insert_many(JobInsertManyParams { jobs: &[job], now: None }).await?;
//! let row = driver.job_get(JobGetParams { id: inserted[0].id }).await?.expect("the job");
//! assert_eq!(row.state, JobState::Available);
//! # Ok(())
//! # }
//! ```
//!
//! ## Features
//!
//! - `testing`: `jobs_postgres::testing`, a throwaway Postgres cluster and a migrated
//!   database per test.

mod cached;
pub mod connection;
mod driver;
mod job_context;
mod jobs;
mod key_rates;
mod kind_stats;
mod leader;
mod listener;
mod liveness;
pub mod migrate;
mod migration_lock;
mod nodes;
mod notifications;
mod op_conn;
mod operations;
#[cfg(test)]
mod plan_tests;
mod pool;
pub mod pooler;
mod queue_limits;
mod queue_settings;
mod queues;
mod rows;
mod schedules;
pub mod schema;
mod server;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
pub mod wakeups;
mod workflows;

pub use driver::PgDriver;
pub use job_context::PgContext;
pub use jobs_driver::{AVAILABLE_CHANNEL, CONTROL_CHANNEL};
pub use migrate::migrate;
pub use pool::{Pool, PooledConnection, connect, pool};
