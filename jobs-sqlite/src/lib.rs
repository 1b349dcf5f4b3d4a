//! The SQLite driver of the jobs framework.
//!
//! [`SqliteDriver`] implements [`jobs_driver::Driver`] on a SQLite database file, through
//! diesel's SQLite backend with the library compiled in (nothing to install) and
//! `diesel-async`'s `SyncConnectionWrapper`. Every statement the engine runs on SQLite is
//! in this crate, with the schema's migrations ([`migrate()`]) and the notifications that
//! stand in for LISTEN/NOTIFY (a `job_notifications` table each process reads every few
//! tens of milliseconds; a process's own notifications reach it at once).
//! Its [`ConnectionDriver`](jobs_driver::ConnectionDriver) implementation holds the
//! operations an application runs on a connection of its own, inside its transaction,
//! async or sync.
//!
//! SQLite serves one host and one writer at a time: several worker processes can share a
//! file, and take turns to write. It has no `SKIP LOCKED` and needs none.
//!
//! ```
//! use jobs_driver::{Capability, Driver, JobGetParams, JobInsertManyParams, JobState, NewJob};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A migrated database in a temporary file; in an app,
//! // `SqliteDriver::open("sqlite://jobs.db", 4)?` then `driver.migrate().await?`.
//! let db = jobs_sqlite::testing::TestDatabase::new().await?;
//! let driver = db.driver(4)?;
//! assert!(!driver.capabilities().has(Capability::SkipLocked));
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
//! - `testing`: `jobs_sqlite::testing`, a migrated database file per test.

mod cached;
mod connection;
mod driver;
mod exec;
mod jobs;
mod key_rates;
mod kind_stats;
mod leader;
mod listener;
mod liveness;
mod local;
pub mod migrate;
mod nodes;
mod notifications;
mod operations;
#[cfg(test)]
mod plan_tests;
mod pool;
mod queue_limits;
mod queue_settings;
mod queues;
mod rows;
mod schedules;
mod search;
mod server;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
mod time;
mod workflows;
mod writer;

pub use driver::{CAPABILITIES, DEFAULT_NOTIFICATION_POLL, SqliteDriver};
pub use migrate::{MIGRATIONS, migrate_sync};
pub use pool::{
    AsyncSqliteConnection, BUSY_TIMEOUT, ConnectionSettings, Pool, PooledConnection, connect, connect_sync,
    connect_sync_with, database_path, pool, pool_with,
};

/// Applies the pending migrations on an application's async SQLite connection (see
/// [`migrate::migrate`]).
pub use migrate::migrate;
