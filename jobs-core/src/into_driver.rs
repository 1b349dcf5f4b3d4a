//! What the worker, the dashboard and the services accept as their database: a driver,
//! or a pool that a driver wraps.

use std::sync::Arc;

use jobs_driver::Driver;

use crate::error::{Error, Result};

/// The driver for a database URL, on a pool of at most `max_connections`: the scheme
/// picks the backend (`postgres://` or `postgresql://` with the `postgres` feature,
/// `sqlite://` with the `sqlite` feature, `mysql://` or `mariadb://` with the `mysql`
/// feature). For the CLI, the demo and anything that takes
/// a URL from its environment.
pub fn driver_for_url(url: &str, max_connections: usize) -> Result<Arc<dyn Driver>> {
    // A URL copied from a `.env` file may keep its spaces.
    let url = url.trim();
    // `sqlite:app.db` and `file:app.db` name SQLite files as `sqlite://app.db` does.
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme)
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+'))
        .unwrap_or("");
    match scheme {
        #[cfg(feature = "postgres")]
        "postgres" | "postgresql" => Ok(jobs_postgres::pool(url, max_connections)?.into_driver()),
        #[cfg(feature = "sqlite")]
        "sqlite" | "file" => Ok(jobs_sqlite::SqliteDriver::open(url, max_connections)?.into_driver()),
        #[cfg(feature = "mysql")]
        "mysql" | "mariadb" => {
            let url = url.replacen("mariadb://", "mysql://", 1);
            Ok(jobs_mysql::MysqlDriver::open(&url, max_connections)?.into_driver())
        }
        // Not echoed: the URL may hold a password.
        "" => Err(Error::InvalidOption {
            option: "database_url",
            reason: format!(
                "the URL has no scheme{}; this build reads: {}",
                if url.starts_with(['"', '\'']) { " (it is in quotes: remove them)" } else { "" },
                BUILT_IN_SCHEMES.join(", ")
            ),
        }),
        _ => Err(Error::InvalidOption {
            option: "database_url",
            reason: format!(
                "no driver for `{scheme}:` URLs in this build; it reads: {}",
                BUILT_IN_SCHEMES.join(", ")
            ),
        }),
    }
}

/// The URL schemes [`driver_for_url`] knows in this build.
const BUILT_IN_SCHEMES: &[&str] = &[
    #[cfg(feature = "postgres")]
    "postgres://user:password@host:5432/database",
    #[cfg(feature = "sqlite")]
    "sqlite://path/to/file.db (or sqlite:file.db)",
    #[cfg(feature = "mysql")]
    "mysql://user:password@host:3306/database (or mariadb://)",
];

/// Converts into the shared driver the engine runs on: `Worker::builder(pool)`,
/// `Worker::builder(driver)`, `DashboardConfig::new(pool)`.
pub trait IntoDriver {
    /// The driver.
    fn into_driver(self) -> Arc<dyn Driver>;
}

impl IntoDriver for Arc<dyn Driver> {
    fn into_driver(self) -> Arc<dyn Driver> {
        self
    }
}

impl IntoDriver for &Arc<dyn Driver> {
    fn into_driver(self) -> Arc<dyn Driver> {
        self.clone()
    }
}

#[cfg(feature = "postgres")]
impl IntoDriver for jobs_postgres::PgDriver {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(self)
    }
}

/// Today's pool: wrapped in a [`PgDriver`](jobs_postgres::PgDriver).
#[cfg(feature = "postgres")]
impl IntoDriver for jobs_postgres::Pool {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(jobs_postgres::PgDriver::new(self))
    }
}

/// A clone of the pool, wrapped in a [`PgDriver`](jobs_postgres::PgDriver).
#[cfg(feature = "postgres")]
impl IntoDriver for &jobs_postgres::Pool {
    fn into_driver(self) -> Arc<dyn Driver> {
        self.clone().into_driver()
    }
}

#[cfg(feature = "postgres")]
impl IntoDriver for &jobs_postgres::PgDriver {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(self.clone())
    }
}

#[cfg(feature = "sqlite")]
impl IntoDriver for jobs_sqlite::SqliteDriver {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(self)
    }
}

#[cfg(feature = "sqlite")]
impl IntoDriver for &jobs_sqlite::SqliteDriver {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(self.clone())
    }
}

#[cfg(feature = "mysql")]
impl IntoDriver for jobs_mysql::MysqlDriver {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(self)
    }
}

#[cfg(feature = "mysql")]
impl IntoDriver for &jobs_mysql::MysqlDriver {
    fn into_driver(self) -> Arc<dyn Driver> {
        Arc::new(self.clone())
    }
}
