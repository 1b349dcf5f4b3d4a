//! Connections through a pooler in transaction mode (PgBouncer's `pool_mode = transaction`,
//! 1.18 or later, with no prepared-statement support of its own).
//!
//! Such a pooler lends a server connection to a client for one transaction, then gives it
//! to another client. A statement outside an explicit transaction is a transaction of its
//! own, and `diesel-async` sends each statement in three such steps (prepare a named
//! statement, run it, close it): they may land on three different server connections, and
//! fail with "prepared statement "s12" does not exist", or leave the statement behind to
//! collide with another process's statement of the same name. Connection set-up has the
//! same trap (`diesel-async` runs two `SET`s as prepared statements).
//!
//! The connections made here never let a prepared statement outlive its transaction:
//! - set-up runs inside a transaction, and its statements are closed before it commits;
//! - the prepared-statement cache is off, so every statement is closed right after it
//!   runs, inside whatever transaction it ran in.
//!
//! A statement is then safe through the pooler as long as it runs inside an explicit
//! transaction: the application's enqueue does (it is the point of enqueueing on the
//! application's own connection), and [`PgDriver::through_pooler`](crate::PgDriver::through_pooler)
//! runs each of the engine's operations in a transaction of its own.
//!
//! ```no_run
//! # async fn run() -> Result<(), jobs_driver::DriverError> {
//! // The pooler's address; the worker polls, or listens on a direct connection.
//! let pool = jobs_postgres::pooler::pool("postgres://app@pgbouncer:6432/app", 16)?;
//! let driver = jobs_postgres::PgDriver::through_pooler(pool)
//!     .listen_directly("postgres://app@db:5432/app");
//! # let _ = driver; Ok(()) }
//! ```

use diesel::ConnectionError;
use diesel::connection::CacheSize;
use diesel_async::pooled_connection::ManagerConfig;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures::FutureExt;
use jobs_driver::Result;

use crate::pool::Pool;

/// Opens one connection through a pooler in transaction mode: set-up inside a
/// transaction, no prepared-statement cache (see the module docs).
pub async fn connect(database_url: &str) -> Result<AsyncPgConnection> {
    Ok(establish(database_url).await?)
}

/// A pool of at most `max_size` connections through a pooler in transaction mode, each made
/// by [`connect`]. Hand it to [`PgDriver::through_pooler`](crate::PgDriver::through_pooler),
/// and check connections out of it for the application's own transactions.
pub fn pool(database_url: &str, max_size: usize) -> Result<Pool> {
    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(|url| establish(url).boxed());
    crate::pool::build(database_url, max_size, config)
}

async fn establish(database_url: &str) -> diesel::ConnectionResult<AsyncPgConnection> {
    let (client, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls)
        .await
        .map_err(|e| ConnectionError::BadConnection(e.to_string()))?;
    // The connection's I/O runs on a task of its own until the client is dropped.
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a connection through the pooler ended");
        }
    });
    // The simple-query protocol prepares nothing: safe outside a transaction.
    client.batch_execute("BEGIN").await.map_err(|e| ConnectionError::BadConnection(e.to_string()))?;
    // diesel-async's set-up statements now run on the one server connection this
    // transaction holds.
    let mut conn = AsyncPgConnection::try_from(client).await?;
    // Closes whatever set-up left prepared, before the transaction ends.
    conn.set_prepared_statement_cache_size(CacheSize::Disabled);
    conn.batch_execute("COMMIT").await.map_err(ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}
