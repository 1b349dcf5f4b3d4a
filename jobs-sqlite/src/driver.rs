//! [`SqliteDriver`]: the [`Driver`] on a SQLite database file. Each operation runs on a
//! pooled connection's blocking thread (see `exec`); writes take this process's turn at
//! the file's one write lock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jobs_driver::{Capabilities, Capability, DriverError, Notification, Result};

use crate::exec::write;
use crate::local::{self, Local};
use crate::pool::{self, ConnectionSettings, Pool, PooledConnection};

/// What SQLite can do: notifications (through `job_notifications`, read every
/// [`notification_poll`](SqliteDriver::notification_poll)), JSON containment search (an
/// SQL function on each connection), `RETURNING`, and liveness locks (a file lock beside
/// the database per node). It has no `SKIP LOCKED` (one writer
/// at a time: claims take turns) and no statistics to estimate counts from.
pub const CAPABILITIES: Capabilities = Capabilities::NONE
    .with(Capability::ListenNotify)
    .with(Capability::JsonContainment)
    .with(Capability::Returning)
    .with(Capability::LivenessLocks);

/// The default of [`SqliteDriver::notification_poll`].
pub const DEFAULT_NOTIFICATION_POLL: Duration = Duration::from_millis(25);

/// The SQLite driver. Cheap to clone (the pool is shared).
///
/// Several processes can share one database file on one host; SQLite serves one writer
/// at a time, which the driver's writes (claims, completions, inserts) take in turn.
#[derive(Clone)]
pub struct SqliteDriver {
    pub(crate) pool: Pool,
    path: PathBuf,
    pub(crate) local: Arc<Local>,
    pub(crate) notification_poll: Duration,
}

impl std::fmt::Debug for SqliteDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("SqliteDriver")
            .field("path", &self.path)
            .field("pool_size", &status.size)
            .field("max_size", &status.max_size)
            .finish()
    }
}

impl SqliteDriver {
    /// The driver on the database `url` names (`sqlite://path/to/jobs.db`; the file is
    /// created when missing), with a pool of at most `max_connections`.
    pub fn open(url: &str, max_connections: usize) -> Result<SqliteDriver> {
        SqliteDriver::open_with(url, max_connections, ConnectionSettings::default())
    }

    /// [`open`](Self::open) with `settings` for each connection.
    pub fn open_with(
        url: &str,
        max_connections: usize,
        settings: ConnectionSettings,
    ) -> Result<SqliteDriver> {
        let path = pool::database_path(url)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
            return Err(DriverError::Pool(format!(
                "the SQLite file `{}` cannot be created: its directory `{}` does not exist",
                path.display(),
                dir.display()
            )));
        }
        Ok(SqliteDriver::with_settings(pool::pool_with(url, max_connections, settings)?, &path, settings))
    }

    /// The driver on `pool`, a pool of connections to the file at `path` (made with the
    /// default [`ConnectionSettings`]).
    pub fn new(pool: Pool, path: &Path) -> SqliteDriver {
        SqliteDriver::with_settings(pool, path, ConnectionSettings::default())
    }

    fn with_settings(pool: Pool, path: &Path, settings: ConnectionSettings) -> SqliteDriver {
        SqliteDriver {
            pool,
            path: path.to_path_buf(),
            local: local::for_file(path, settings),
            notification_poll: DEFAULT_NOTIFICATION_POLL,
        }
    }

    /// How often a listener reads the notifications other processes committed (default
    /// 25 ms; this process's own reach its listeners at once). Between 1 ms and 10 s.
    pub fn notification_poll(mut self, every: Duration) -> Result<SqliteDriver> {
        if every < Duration::from_millis(1) || every > Duration::from_secs(10) {
            return Err(DriverError::Runtime(format!(
                "notification_poll: {every:?} is outside 1 ms to 10 s"
            )));
        }
        self.notification_poll = every;
        Ok(self)
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `op` (sync, on the connection's thread) as a write, then delivers the
    /// notifications it added to this process's listeners.
    pub(crate) async fn write_notifying<R, F>(&self, op: F) -> Result<R>
    where
        F: FnOnce(&mut diesel::SqliteConnection) -> Result<(R, Vec<Notification>)> + Send + 'static,
        R: Send + 'static,
    {
        let (result, told) = write(&self.local, op).await?;
        self.deliver(told);
        Ok(result)
    }

    /// This process's turn at the write lock, and a pooled connection to write with: for
    /// the async operations an application may also run on its own connection (see
    /// `operations::in_transaction!`).
    pub(crate) async fn write_turn(&self) -> Result<(tokio::sync::MutexGuard<'_, ()>, WriteConnection)> {
        let turn = self.local.write_gate.lock().await;
        Ok((turn, WriteConnection(Some(pool::get(&self.pool).await?))))
    }

    pub(crate) fn deliver(&self, told: Vec<Notification>) {
        for notification in told {
            // No listener in this process is not an error.
            let _ = self.local.wake.send(notification);
        }
    }
}

/// A pooled connection an async transaction runs on. Should the future driving the
/// transaction be dropped before it ends (the caller went away: a dashboard request
/// whose browser disconnected, say), the connection leaves the pool and closes, which
/// rolls the transaction back and frees SQLite's write lock at once; back in the pool, it
/// would hold the lock until its next checkout, and every writer of every process would
/// wait for it.
pub(crate) struct WriteConnection(Option<PooledConnection>);

impl WriteConnection {
    /// The transaction ended (committed or rolled back): back to the pool.
    pub(crate) fn finish(mut self) {
        self.0.take();
    }
}

impl std::ops::Deref for WriteConnection {
    type Target = crate::pool::AsyncSqliteConnection;
    fn deref(&self) -> &Self::Target {
        // Present until `finish` or `drop`, which consume it.
        self.0.as_deref().unwrap_or_else(|| unreachable!("a finished write connection is not used"))
    }
}

impl std::ops::DerefMut for WriteConnection {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.as_deref_mut().unwrap_or_else(|| unreachable!("a finished write connection is not used"))
    }
}

impl Drop for WriteConnection {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(diesel_async::pooled_connection::deadpool::Object::take(conn));
        }
    }
}
