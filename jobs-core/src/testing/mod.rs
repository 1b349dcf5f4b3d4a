//! Test support (feature `testing`): a throwaway Postgres, a database per test, and
//! helpers for asserting on and running jobs in your own tests.

mod assertions;
pub mod cluster;
mod context;
mod database;
pub(crate) mod inline;
mod running;

pub use assertions::{Expected, assert_enqueued, refute_enqueued};
pub use cluster::PgCluster;
pub use context::job_context;
pub use database::{Server, TestDatabase, replace_database};
pub use inline::inline;
pub use running::{drain_queue, perform_job};
