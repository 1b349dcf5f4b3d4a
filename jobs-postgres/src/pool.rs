//! Connections: a deadpool pool of async Postgres connections, and single connections.

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool as DeadPool};
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod};
use jobs_driver::{DriverError, Result};

/// A pool of async Postgres connections (deadpool).
pub type Pool = DeadPool<AsyncPgConnection>;

/// A connection checked out of a [`Pool`].
pub type PooledConnection = Object<AsyncPgConnection>;

/// Builds a connection pool of at most `max_size` connections for `database_url`.
///
/// Waiting for a connection is bounded (10 s) so a database that went away surfaces as a
/// [`DriverError::Pool`] instead of a hang. A returned connection is reused without a test
/// query (one round trip less per checkout) unless it is closed or its transaction broken;
/// a connection that died unnoticed fails its next query, which every caller retries.
pub fn pool(database_url: &str, max_size: usize) -> Result<Pool> {
    build(database_url, max_size, ManagerConfig::default())
}

/// A pool of `config`'s connections to `database_url`, with this module's recycling and
/// time limits.
pub(crate) fn build(
    database_url: &str,
    max_size: usize,
    mut config: ManagerConfig<AsyncPgConnection>,
) -> Result<Pool> {
    config.recycling_method = RecyclingMethod::Fast;
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(database_url, config);
    DeadPool::builder(manager)
        .max_size(max_size.max(1))
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(10)))
        .build()
        .map_err(|e| DriverError::Pool(e.to_string()))
}

/// Opens one connection outside any pool.
pub async fn connect(database_url: &str) -> Result<AsyncPgConnection> {
    use diesel_async::AsyncConnection;
    Ok(AsyncPgConnection::establish(database_url).await?)
}

/// A connection from `pool`, its error as a [`DriverError`].
pub(crate) async fn get(pool: &Pool) -> Result<PooledConnection> {
    pool.get().await.map_err(|e| DriverError::Pool(e.to_string()))
}
