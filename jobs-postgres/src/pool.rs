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
    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(|url| Box::pin(establish(url.to_owned())));
    build(database_url, max_size, config)
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
    Ok(establish(database_url.to_owned()).await?)
}

/// Opens a connection as diesel-async does, but a failure names the server it tried and
/// why (diesel-async's text is tokio-postgres's alone: "error connecting to server").
async fn establish(database_url: String) -> diesel::ConnectionResult<AsyncPgConnection> {
    let (client, connection) = tokio_postgres::connect(&database_url, tokio_postgres::NoTls)
        .await
        .map_err(|e| diesel::ConnectionError::BadConnection(explain(&database_url, &e)))?;
    AsyncPgConnection::try_from_client_and_connection(client, connection).await
}

/// "could not connect to Postgres at host:port (database `d`, user `u`): cause: cause…",
/// the password left out.
pub(crate) fn explain(database_url: &str, e: &tokio_postgres::Error) -> String {
    let target = match database_url.parse::<tokio_postgres::Config>() {
        Ok(config) => {
            let hosts: Vec<String> = config
                .get_hosts()
                .iter()
                .enumerate()
                .map(|(i, host)| {
                    let port =
                        config.get_ports().get(i).or(config.get_ports().first()).copied().unwrap_or(5432);
                    match host {
                        tokio_postgres::config::Host::Tcp(h) => format!("{h}:{port}"),
                        tokio_postgres::config::Host::Unix(dir) => {
                            format!("{}/.s.PGSQL.{port}", dir.display())
                        }
                    }
                })
                .collect();
            format!(
                "{} (database `{}`, user `{}`)",
                if hosts.is_empty() { "localhost:5432".to_owned() } else { hosts.join(", ") },
                config.get_dbname().unwrap_or("(the user's)"),
                config.get_user().unwrap_or("(the OS user's)")
            )
        }
        Err(_) => "the URL given".to_owned(),
    };
    let mut cause = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        cause.push_str(": ");
        cause.push_str(&s.to_string());
        source = s.source();
    }
    format!("could not connect to Postgres at {target}: {cause}")
}

/// A connection from `pool`, its error as a [`DriverError`].
pub(crate) async fn get(pool: &Pool) -> Result<PooledConnection> {
    pool.get().await.map_err(|e| DriverError::Pool(e.to_string()))
}
