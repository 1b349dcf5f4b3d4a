//! Test support (feature `testing`): a throwaway Postgres, a database per test, and
//! helpers for asserting on and running jobs in your own tests.

pub mod cluster;
mod context;
mod database;

pub use cluster::PgCluster;
pub use context::job_context;
pub use database::{Server, TestDatabase, replace_database};
