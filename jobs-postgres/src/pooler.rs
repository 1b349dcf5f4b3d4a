//! Connections through a pooler in transaction mode (PgBouncer's `pool_mode = transaction`;
//! tested on 1.18, which has no prepared-statement support of its own).
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
//! - set-up also makes tokio-postgres look up the schema's own types (it keeps the
//!   statements that look types up for the connection's life), then deallocates them;
//! - the prepared-statement cache is off, so every statement is closed right after it
//!   runs, inside whatever transaction it ran in.
//!
//! Make the pool after the schema exists (or let [`PgDriver::migrate`](jobs_driver::Driver::migrate)
//! migrate through it, which then drops the connections made before): a connection made
//! before would look the types up later, and leave those statements behind.
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

use std::sync::Mutex;

use diesel::connection::CacheSize;
use diesel::sql_types::Bool;
use diesel::{ConnectionError, QueryableByName};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use futures::FutureExt;
use jobs_driver::Result;

use crate::pool::Pool;

/// Opens one connection through a pooler in transaction mode: set-up inside a
/// transaction, no prepared-statement cache (see the module docs).
pub async fn connect(database_url: &str) -> Result<AsyncPgConnection> {
    Ok(establish(database_url).await?)
}

/// A pool of at most `max_size` connections through a pooler in transaction mode, each made
/// by [`connect`]. Use it for the application's own transactions too. A driver made of it
/// (`PgDriver::new(pool)`, `Worker::builder(pool)`, `DashboardConfig::new(pool)`) is a
/// [`PgDriver::through_pooler`](crate::PgDriver::through_pooler) one, and an enqueue through
/// it (`enqueue(&pool)`) runs in a transaction of its own: [`is_pooler_pool`] tells them.
pub fn pool(database_url: &str, max_size: usize) -> Result<Pool> {
    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(|url| establish(url).boxed());
    let pool = crate::pool::build(database_url, max_size, config)?;
    let mut pools = POOLER_POOLS.lock().unwrap_or_else(|e| e.into_inner());
    pools.retain(|(_, weak)| weak.upgrade().is_some());
    pools.push((pool_key(&pool), pool.weak()));
    Ok(pool)
}

type WeakPool = deadpool::managed::WeakPool<AsyncDieselConnectionManager<AsyncPgConnection>>;

/// The live pools [`pool`] made, by the address of their manager (shared by clones; the
/// weak reference keeps the address from being reused while the entry exists).
static POOLER_POOLS: Mutex<Vec<(usize, WeakPool)>> = Mutex::new(Vec::new());

fn pool_key(pool: &Pool) -> usize {
    std::ptr::from_ref(pool.manager()) as usize
}

/// Whether `pool` (or the pool it is a clone of) was made by [`pool`]: it goes through a
/// pooler in transaction mode.
pub fn is_pooler_pool(pool: &Pool) -> bool {
    let key = pool_key(pool);
    POOLER_POOLS.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|(k, _)| *k == key)
}

#[derive(QueryableByName)]
struct Present {
    #[diesel(sql_type = Bool)]
    present: bool,
}

async fn establish(database_url: &str) -> diesel::ConnectionResult<AsyncPgConnection> {
    let (client, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls)
        .await
        .map_err(|e| ConnectionError::BadConnection(crate::pool::explain(database_url, &e)))?;
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
    conn.set_prepared_statement_cache_size(CacheSize::Disabled);
    // tokio-postgres looks a type it does not know up (the `job_state` enum and its array)
    // with statements it prepares once and keeps for the client's life. Looked up here,
    // they are never needed again, and DEALLOCATE removes them from this server connection
    // before the pooler lends it to anyone else.
    let schema: Present = diesel::sql_query("SELECT to_regtype('job_state') IS NOT NULL AS present")
        .get_result(&mut conn)
        .await
        .map_err(ConnectionError::CouldntSetupConfiguration)?;
    if schema.present {
        diesel::sql_query("SELECT NULL::job_state AS state, NULL::job_state[] AS states")
            .execute(&mut conn)
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
    }
    conn.batch_execute("DEALLOCATE ALL; COMMIT").await.map_err(ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}
