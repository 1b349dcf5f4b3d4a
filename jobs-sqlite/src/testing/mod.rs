//! Test support: a migrated SQLite database file per test, removed with it.

use std::path::{Path, PathBuf};

use jobs_driver::{DriverError, Result};

use crate::driver::SqliteDriver;
use crate::migrate::migrate_sync;
use crate::pool::{self, AsyncSqliteConnection, Pool, connect_sync};

/// A fresh, migrated database in a temporary directory of its own; the directory goes
/// when this is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    dir: tempfile::TempDir,
    path: PathBuf,
}

impl TestDatabase {
    /// Creates and migrates the database.
    pub async fn new() -> Result<TestDatabase> {
        let dir = tempfile::Builder::new().prefix("jobs-sqlite-").tempdir()?;
        let path = dir.path().join("jobs.db");
        let file = path.clone();
        tokio::task::spawn_blocking(move || migrate_sync(&mut connect_sync(&file)?))
            .await
            .map_err(|e| DriverError::Runtime(format!("migrating the test database panicked: {e}")))??;
        Ok(TestDatabase { dir, path })
    }

    /// The database's URL (`sqlite:///…/jobs.db`).
    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding the file (and its WAL).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A pool of `max_size` connections to the database.
    pub fn pool(&self, max_size: usize) -> Result<Pool> {
        pool::pool(&self.url(), max_size)
    }

    /// A driver on a pool of `max_size` connections to the database.
    pub fn driver(&self, max_size: usize) -> Result<SqliteDriver> {
        SqliteDriver::open(&self.url(), max_size)
    }

    /// Opens an async connection to the database.
    pub async fn connect(&self) -> Result<AsyncSqliteConnection> {
        pool::connect(&self.url()).await
    }
}
