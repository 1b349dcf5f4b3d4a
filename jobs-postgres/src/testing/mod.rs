//! Test support (feature `testing`): a throwaway Postgres cluster started from the
//! installed server binaries ([`PgCluster`]), and a migrated database per test copied from
//! a template ([`TestDatabase`]).

mod admin;
pub mod cluster;
mod database;
#[cfg(test)]
pub(crate) mod explain;
mod server_binaries;

pub use cluster::PgCluster;
pub use database::{Server, TestDatabase, replace_database};
