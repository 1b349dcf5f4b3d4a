//! Connections: a deadpool pool of SQLite connections used from async code
//! (`SyncConnectionWrapper<SqliteConnection>`), and the settings every connection gets.

use std::path::{Path, PathBuf};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use diesel_async::pooled_connection::deadpool::{Object, Pool as DeadPool};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use jobs_driver::{DriverError, Result};

use crate::search;

/// An async SQLite connection: diesel's `SqliteConnection`, each statement run on tokio's
/// blocking threads.
pub type AsyncSqliteConnection = SyncConnectionWrapper<SqliteConnection>;

/// A pool of [`AsyncSqliteConnection`]s (deadpool).
pub type Pool = DeadPool<AsyncSqliteConnection>;

/// A connection checked out of a [`Pool`].
pub type PooledConnection = Object<AsyncSqliteConnection>;

/// How long a statement waits for another connection's write lock by default (see
/// [`ConnectionSettings::busy_timeout`]).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What each connection starts with. Every connection is in WAL mode: readers never block
/// the writer, nor the writer readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionSettings {
    /// How long a statement waits for another connection's (or process's) write lock
    /// before it fails with "database is locked", which the engine retries (default 5 s,
    /// at most 10 minutes).
    pub busy_timeout: Duration,
    /// `true` (the default): a commit is on disk when it returns (`synchronous = FULL`), so
    /// an enqueued job survives a power cut, as on Postgres with `synchronous_commit = on`.
    /// `false` (`NORMAL`): commits survive a crash of the process but the last ones may be
    /// lost with the machine; faster on slow disks.
    pub durable_commits: bool,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        ConnectionSettings { busy_timeout: BUSY_TIMEOUT, durable_commits: true }
    }
}

impl ConnectionSettings {
    fn check(&self) -> Result<()> {
        if self.busy_timeout > Duration::from_secs(600) {
            return Err(DriverError::Pool(format!(
                "busy_timeout: {:?} is longer than 10 minutes",
                self.busy_timeout
            )));
        }
        Ok(())
    }

    fn pragmas(&self) -> String {
        format!(
            // The busy timeout first: switching a new file to WAL takes a lock, which
            // another connection opening at the same moment may hold.
            "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = {};",
            self.busy_timeout.as_millis(),
            if self.durable_commits { "FULL" } else { "NORMAL" }
        )
    }
}

/// The file a `sqlite://` URL (or a plain path) names: `sqlite://jobs.db` is `jobs.db`
/// relative to the working directory, `sqlite:///var/lib/app/jobs.db` is absolute. A
/// query string is ignored. In-memory databases are refused: each pooled connection
/// would see a database of its own.
pub fn database_path(url: &str) -> Result<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .or_else(|| url.strip_prefix("file:"))
        .unwrap_or(url);
    let path = rest.split_once('?').map_or(rest, |(path, _)| path);
    if path.is_empty() || path == ":memory:" || rest.contains("mode=memory") {
        return Err(DriverError::Pool(format!(
            "`{url}`: give SQLite a file (sqlite://path/to/jobs.db); an in-memory database is one per connection"
        )));
    }
    Ok(PathBuf::from(path))
}

/// Opens one synchronous connection to the file at `path` with the default settings and
/// the driver's functions.
pub fn connect_sync(path: &Path) -> Result<SqliteConnection> {
    connect_sync_with(path, ConnectionSettings::default())
}

/// [`connect_sync`] with `settings`.
pub fn connect_sync_with(path: &Path, settings: ConnectionSettings) -> Result<SqliteConnection> {
    settings.check()?;
    let mut conn = SqliteConnection::establish(&path.to_string_lossy())?;
    conn.batch_execute(&settings.pragmas())?;
    search::register(&mut conn)?;
    Ok(conn)
}

/// Opens one async connection to the database `url` names (see [`database_path`]), with
/// the driver's settings.
pub async fn connect(url: &str) -> Result<AsyncSqliteConnection> {
    let path = database_path(url)?;
    let conn = tokio::task::spawn_blocking(move || connect_sync(&path))
        .await
        .map_err(|e| DriverError::Runtime(format!("opening a SQLite connection panicked: {e}")))??;
    Ok(SyncConnectionWrapper::new(conn))
}

/// Builds a pool of at most `max_size` connections to the database `url` names (see
/// [`database_path`]); the file is created when missing.
///
/// SQLite has one writer at a time: the driver queues its own writes in the process (see
/// `SqliteDriver`), so a handful of connections serve a worker and a dashboard; more only
/// help concurrent reads.
pub fn pool(url: &str, max_size: usize) -> Result<Pool> {
    pool_with(url, max_size, ConnectionSettings::default())
}

/// [`pool`] with `settings` for each connection.
pub fn pool_with(url: &str, max_size: usize, settings: ConnectionSettings) -> Result<Pool> {
    settings.check()?;
    let path = database_path(url)?;
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    config.custom_setup = Box::new(move |_url| {
        let path = path.clone();
        Box::pin(async move {
            let conn = tokio::task::spawn_blocking(move || connect_sync_with(&path, settings))
                .await
                .map_err(|e| diesel::ConnectionError::BadConnection(e.to_string()))?
                .map_err(|e| diesel::ConnectionError::BadConnection(e.to_string()))?;
            Ok(SyncConnectionWrapper::new(conn))
        })
    });
    let manager = AsyncDieselConnectionManager::<AsyncSqliteConnection>::new_with_config(url, config);
    DeadPool::builder(manager)
        .max_size(max_size.max(1))
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(10)))
        .build()
        .map_err(|e| DriverError::Pool(e.to_string()))
}

/// A connection from `pool`, its error as a [`DriverError`].
pub(crate) async fn get(pool: &Pool) -> Result<PooledConnection> {
    pool.get().await.map_err(|e| DriverError::Pool(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_files() {
        assert_eq!(database_path("sqlite://jobs.db").ok(), Some(PathBuf::from("jobs.db")));
        assert_eq!(database_path("sqlite:///var/lib/jobs.db").ok(), Some(PathBuf::from("/var/lib/jobs.db")));
        assert_eq!(database_path("sqlite:jobs.db?mode=rwc").ok(), Some(PathBuf::from("jobs.db")));
        assert_eq!(database_path("/tmp/x.db").ok(), Some(PathBuf::from("/tmp/x.db")));
        for memory in ["sqlite://:memory:", ":memory:", "sqlite://", "file:x?mode=memory"] {
            assert!(database_path(memory).is_err(), "{memory}");
        }
    }
}
