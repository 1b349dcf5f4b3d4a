//! Connections: a deadpool pool of `AsyncMysqlConnection`s (pure Rust), each set up for
//! the driver's statements.

use std::time::Duration;

use diesel::ConnectionError;
use diesel_async::pooled_connection::deadpool::{Object, Pool as DeadPool};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod};
use diesel_async::{
    AnsiTransactionManager, AsyncConnection, AsyncMysqlConnection, SimpleAsyncConnection, TransactionManager,
};
use jobs_driver::{DriverError, Result};

/// A pool of async MySQL connections (deadpool).
pub type Pool = DeadPool<AsyncMysqlConnection>;

/// A connection checked out of a [`Pool`].
pub type PooledConnection = Object<AsyncMysqlConnection>;

/// The session each connection starts with (diesel-async already sets the time zone to
/// UTC and the character set to utf8mb4):
/// - `READ COMMITTED`: a claim's `FOR UPDATE SKIP LOCKED` then locks only the rows it
///   takes, and concurrent inserts never wait on its gap locks (they do under the default
///   `REPEATABLE READ`);
/// - a lock wait of at most 5 s, which the engine retries.
const SESSION: &str =
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET SESSION innodb_lock_wait_timeout = 5";

/// Opens one connection with the driver's session settings.
pub async fn connect(url: &str) -> Result<AsyncMysqlConnection> {
    let mut conn = establish(url).await?;
    conn.batch_execute(SESSION).await?;
    Ok(conn)
}

/// Builds a pool of at most `max_size` connections to `url` (`mysql://user:password@host:port/database`).
pub fn pool(url: &str, max_size: usize) -> Result<Pool> {
    let mut config = ManagerConfig::default();
    // Each checkout checks its connection with the cheapest statement there is: after a
    // server restart (or a failover, or an idle timeout) the pool's connections are closed,
    // and unchecked it would hand them out for ever ("Connection to the server is closed";
    // the MySQL connection does not mark itself broken on I/O errors).
    config.recycling_method = RecyclingMethod::CustomQuery(std::borrow::Cow::Borrowed("DO 0"));
    config.custom_setup = Box::new(|url| {
        let url = url.to_owned();
        Box::pin(async move {
            let mut conn = establish(&url).await?;
            conn.batch_execute(SESSION).await.map_err(ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        })
    });
    let manager = AsyncDieselConnectionManager::<AsyncMysqlConnection>::new_with_config(url, config);
    DeadPool::builder(manager)
        .max_size(max_size.max(1))
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(10)))
        .build()
        .map_err(|e| DriverError::Pool(e.to_string()))
}

/// Opens a connection; a failure names the server it tried (the driver's own text does
/// not: "Input/output error: Connection refused").
async fn establish(url: &str) -> diesel::ConnectionResult<AsyncMysqlConnection> {
    AsyncMysqlConnection::establish(url).await.map_err(|e| {
        let target = url
            .split_once("://")
            .map(|(_, rest)| rest.rsplit_once('@').map_or(rest, |(_, host)| host))
            .map(|rest| rest.split_once('?').map_or(rest, |(r, _)| r))
            .map(|rest| match rest.split_once('/') {
                Some((host, db)) => format!("{host} (database `{db}`)"),
                None => rest.to_owned(),
            })
            .unwrap_or_else(|| "the URL given".to_owned());
        ConnectionError::BadConnection(format!("could not connect to MySQL/MariaDB at {target}: {e}"))
    })
}

/// A connection from `pool`, its error as a [`DriverError`].
pub(crate) async fn get(pool: &Pool) -> Result<PooledConnection> {
    pool.get().await.map_err(|e| DriverError::Pool(e.to_string()))
}

/// A pooled connection lent to one operation, that goes back to the pool for reuse only
/// when the operation finished cleanly ([`Lent::give_back`]). One dropped mid-statement
/// (its future cancelled: a worker shutting down, a `select!` taking another branch) or
/// that lost its link to the server is marked broken, and the pool closes it: the MySQL
/// protocol cannot resume a half-read reply, and the next user would read the rest of it.
pub(crate) struct Lent {
    conn: PooledConnection,
    sound: bool,
}

impl Lent {
    /// Ends the loan; the connection is reused only when `outcome` says it is sound.
    pub(crate) fn give_back<T>(mut self, outcome: &Result<T>) {
        self.sound = !outcome.as_ref().is_err_and(DriverError::is_connection_error);
    }
}

impl std::ops::Deref for Lent {
    type Target = AsyncMysqlConnection;

    fn deref(&self) -> &AsyncMysqlConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for Lent {
    fn deref_mut(&mut self) -> &mut AsyncMysqlConnection {
        &mut self.conn
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if !self.sound {
            // The pool's recycle check finds the transaction state in error and closes it.
            AnsiTransactionManager::transaction_manager_status_mut(&mut *self.conn).set_in_error();
        }
    }
}

/// A connection from `pool` for one operation (see [`Lent`]).
pub(crate) async fn lend(pool: &Pool) -> Result<Lent> {
    Ok(Lent { conn: get(pool).await?, sound: false })
}
