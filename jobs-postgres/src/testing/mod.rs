//! Test support (feature `testing`): a throwaway Postgres cluster started from the
//! installed server binaries ([`PgCluster`]), and a migrated database per test copied from
//! a template ([`TestDatabase`]), and a PgBouncer in transaction mode in front of it
//! ([`PgBouncer`]).

mod admin;
mod binaries;
pub mod cluster;
mod database;
#[cfg(test)]
pub(crate) mod explain;
pub mod pgbouncer;

pub use cluster::PgCluster;
pub use database::{Server, TestDatabase, replace_database};
pub use pgbouncer::PgBouncer;
