//! `server_status`: what the database server is, read at a worker's start and on the
//! dashboard's overview.

use std::time::Duration;

/// `server_status`: the server's version, whether it takes writes, and how far behind its
/// primary it is when it is a replica. One cheap query; nothing is written.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerStatusParams {}

/// What [`ServerStatusParams`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// The version as the server reports it (`PostgreSQL 15.18 ...`, `10.11.14-MariaDB`,
    /// `SQLite 3.50.4`).
    pub version: String,
    /// The major version where the backend numbers them that way (Postgres: 15, 18).
    pub major: Option<u32>,
    /// The server refuses writes: a hot standby replaying a primary's WAL, or a
    /// read-only MariaDB/MySQL replica. Workers refuse to start on one.
    pub read_only: bool,
    /// On a streaming replica: how long ago the last transaction it replayed committed on
    /// the primary, zero when it has replayed everything it received. `None` on a primary,
    /// and on a replica whose lag is unknown (one replaying from an archive).
    pub replica_lag: Option<Duration>,
}

/// The oldest Postgres major version the migrations run on (SQL-standard function bodies
/// came in 14).
pub const OLDEST_POSTGRES_MAJOR: u32 = 14;

impl ServerStatus {
    /// Why workers cannot run on this server, if they cannot: a read-only replica, or a
    /// Postgres older than [`OLDEST_POSTGRES_MAJOR`] (`backend` is the driver's name).
    pub fn unfit_for_workers(&self, backend: &str) -> Option<String> {
        if self.read_only {
            return Some(format!(
                "the database ({}) is read-only (a replica, or in recovery): workers need the primary",
                self.version
            ));
        }
        match self.major {
            Some(major) if backend == "postgres" && major < OLDEST_POSTGRES_MAJOR => Some(format!(
                "Postgres {major} is older than the oldest supported version, {OLDEST_POSTGRES_MAJOR} ({})",
                self.version
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(major: Option<u32>, read_only: bool) -> ServerStatus {
        ServerStatus { version: "v".into(), major, read_only, replica_lag: None }
    }

    #[test]
    fn replicas_and_old_postgres_are_unfit_for_workers() {
        assert_eq!(status(Some(15), false).unfit_for_workers("postgres"), None);
        assert_eq!(status(Some(14), false).unfit_for_workers("postgres"), None);
        let old = status(Some(13), false).unfit_for_workers("postgres").expect("13 is too old");
        assert!(old.contains("Postgres 13 is older than the oldest supported version, 14"), "{old}");
        assert!(
            status(Some(18), true).unfit_for_workers("postgres").expect("read-only").contains("read-only")
        );
        assert_eq!(status(Some(10), false).unfit_for_workers("mysql"), None, "MariaDB 10 is not Postgres 10");
    }
}
