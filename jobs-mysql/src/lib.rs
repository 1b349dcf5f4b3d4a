//! The MariaDB / MySQL driver of the jobs framework.
//!
//! [`MysqlDriver`] implements [`jobs_driver::Driver`] on a MariaDB (10.6 or later) or
//! MySQL (8.0.21 or later) database, through `diesel-async`'s pure-Rust
//! `AsyncMysqlConnection`. Every statement the engine runs there is in this crate, with
//! the schema's migrations ([`migrate()`]) and the notifications that stand in for
//! LISTEN/NOTIFY (a `job_notifications` table each process reads every few tens of
//! milliseconds; a process's own notifications reach it at once). Its
//! [`ConnectionDriver`](jobs_driver::ConnectionDriver) implementation holds the operations
//! an application runs on a connection of its own, inside its transaction, async or sync.
//!
//! Workers claim with `FOR UPDATE SKIP LOCKED`. Where Postgres would say
//! `UPDATE … RETURNING`, a statement stamps the rows it moves with a random token
//! (`jobs.lock_token`) and a second reads them back by it.
//!
//! ```no_run
//! use jobs_driver::{Capability, Driver, JobGetParams, JobInsertManyParams, JobState, NewJob};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let driver = jobs_mysql::MysqlDriver::open("mysql://app:secret@127.0.0.1:3306/app", 8)?;
//! driver.migrate().await?;
//! assert!(driver.capabilities().has(Capability::SkipLocked));
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
//! - `testing`: `jobs_mysql::testing`, a throwaway MariaDB (or MySQL) server and a database
//!   per test.

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
mod returning;
mod rows;
mod schedules;
mod server;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
mod time;
mod wakeups;
mod workflows;

pub use driver::{CAPABILITIES, DEFAULT_NOTIFICATION_POLL, MysqlDriver, WAKE_WINDOW};
pub use migrate::{MIGRATIONS, migrate};
pub use pool::{Pool, PooledConnection, connect, pool};
pub use returning::disable_insert_returning;
