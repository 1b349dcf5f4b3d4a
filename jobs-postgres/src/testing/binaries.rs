//! Where the Postgres server binaries a throwaway cluster starts from are found.

use std::fs;
use std::path::{Path, PathBuf};

use jobs_driver::{DriverError, Result};

fn cluster_error(what: impl Into<String>) -> DriverError {
    DriverError::Server(what.into())
}

/// The variable naming the one directory to take the server binaries from (another
/// major version, say); when set, nothing else is searched.
pub const BIN_DIR_VAR: &str = "JOBS_POSTGRES_BIN";

/// Finds the directory holding `initdb`, `pg_ctl` and `postgres`: the one
/// [`BIN_DIR_VAR`] names when set, else the first on `PATH`, then the newest
/// `/usr/lib/postgresql/*/bin`.
pub fn find_server_binaries() -> Result<PathBuf> {
    let has_all = |dir: &Path| ["initdb", "pg_ctl", "postgres"].iter().all(|b| dir.join(b).is_file());
    if let Some(dir) = std::env::var_os(BIN_DIR_VAR) {
        let dir = PathBuf::from(dir);
        return if has_all(&dir) {
            Ok(dir)
        } else {
            Err(cluster_error(format!(
                "{BIN_DIR_VAR}={} holds no Postgres server binaries (initdb, pg_ctl, postgres)",
                dir.display()
            )))
        };
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_all(&dir) {
                return Ok(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let version = e.file_name().to_str()?.parse::<u32>().ok()?;
                    Some((version, e.path().join("bin")))
                })
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions.into_iter().rev().map(|(_, dir)| dir).find(|dir| has_all(dir)).ok_or_else(|| {
        cluster_error(
            "no Postgres server binaries (initdb, pg_ctl, postgres) on PATH or in \
                 /usr/lib/postgresql/*/bin; install them (apt-get install postgresql) or set DATABASE_URL",
        )
    })
}
