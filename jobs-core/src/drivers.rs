//! The drivers this build has: the one module of jobs-core that names a backend. Each
//! line of [`drivers!`] takes a driver crate when its feature is on, and gives it
//! - a re-export of the crate (`jobs_core::postgres`) and of its driver type
//!   (`jobs_core::PgDriver`);
//! - [`JobsBackend`] for its diesel backend, so the application's own connections of that
//!   backend enqueue, cancel, retry, pause and migrate through its
//!   [`ConnectionDriver`];
//! - its URL schemes in [`driver_for_url`];
//! - [`IntoDriver`] and [`Enqueuer`] for the driver type.
//!
//! The rest of the engine sees only `jobs_driver`'s traits. A new database takes one line
//! in `drivers!` here (its `TestDatabase` in `drivers::testing` is optional); the other
//! places are listed in `docs/ARCHITECTURE.md`, "Adding a database".

use std::sync::Arc;

#[allow(unused_imports, reason = "used by the drivers of the build; a build may have none")]
use jobs_driver::ConnectionDriver;
use jobs_driver::Driver;

use crate::error::{Error, Result};
#[allow(unused_imports, reason = "used by the drivers of the build; a build may have none")]
use crate::{enqueue::Enqueuer, into_driver::IntoDriver};

#[allow(unused_imports, reason = "used by the drivers of the build; a build may have none")]
use crate::backend::JobsBackend;

/// How [`driver_for_url`] opens a driver of the build.
#[allow(dead_code, reason = "a build may have no driver")]
pub(crate) struct Opener {
    /// The URL schemes it reads (without `:`).
    pub schemes: &'static [&'static str],
    /// An example URL, for error messages.
    pub example: &'static str,
    /// Opens it on a pool of at most the given size.
    pub open: fn(&str, usize) -> jobs_driver::Result<Arc<dyn Driver>>,
}

macro_rules! drivers {
    ($($feature:literal => $module:ident: $krate:ident::$driver:ident for $backend:ty;)*) => {
        $(
            #[cfg(feature = $feature)]
            #[doc = concat!("The ", $feature, " driver crate (feature `", $feature, "`).")]
            pub use $krate as $module;
            #[cfg(feature = $feature)]
            pub use $krate::$driver;

            #[cfg(feature = $feature)]
            impl JobsBackend for $backend {
                type Driver = $krate::$driver;
            }

            #[cfg(feature = $feature)]
            impl IntoDriver for $krate::$driver {
                fn into_driver(self) -> Arc<dyn Driver> {
                    Arc::new(self)
                }
            }

            #[cfg(feature = $feature)]
            impl IntoDriver for &$krate::$driver {
                fn into_driver(self) -> Arc<dyn Driver> {
                    Arc::new(self.clone())
                }
            }

            /// Through the driver: the insert commits by itself, and the driver wakes the
            /// workers, rationed per queue as `Enqueuer for &Pool` is on Postgres (with
            /// `NOTIFY`; on SQLite and MySQL this process's workers at once, others' at
            /// their next read of `job_notifications`).
            #[cfg(feature = $feature)]
            impl Enqueuer for &$krate::$driver {
                async fn insert(
                    self,
                    jobs: &[jobs_driver::NewJob],
                ) -> Result<Vec<jobs_driver::Inserted>> {
                    Ok(self.job_insert_many(jobs_driver::JobInsertManyParams { jobs, now: None }).await?)
                }

                async fn insert_workflow(
                    self,
                    workflow: &jobs_driver::NewWorkflow,
                ) -> Result<jobs_driver::InsertedWorkflow> {
                    let params = jobs_driver::JobInsertWorkflowParams { workflow, now: None };
                    Ok(self.job_insert_workflow(params).await?)
                }

                async fn change_batch(
                    self,
                    change: &jobs_driver::BatchChange,
                ) -> Result<jobs_driver::BatchChanged> {
                    Ok(self.job_batch(jobs_driver::JobBatchParams { change, now: None }).await?)
                }
            }
        )*

        /// The drivers of the build, in the order of [`drivers!`].
        pub(crate) const OPENERS: &[Opener] = &[$(
            #[cfg(feature = $feature)]
            Opener {
                schemes: <$krate::$driver as ConnectionDriver>::URL_SCHEMES,
                example: <$krate::$driver as ConnectionDriver>::URL_EXAMPLE,
                open: <$krate::$driver as ConnectionDriver>::open_shared,
            },
        )*];
    };
}

drivers! {
    "postgres" => postgres: jobs_postgres::PgDriver for diesel::pg::Pg;
    "sqlite" => sqlite: jobs_sqlite::SqliteDriver for diesel::sqlite::Sqlite;
    "mysql" => mysql: jobs_mysql::MysqlDriver for diesel::mysql::Mysql;
}

/// An example URL of each driver of the build, in the order of `drivers!` (for help texts:
/// `postgres://user:password@host/database`, …).
pub fn driver_url_examples() -> Vec<&'static str> {
    OPENERS.iter().map(|o| o.example).collect()
}

/// The driver for a database URL, on a pool of at most `max_connections`: the scheme
/// picks the backend (`postgres://` or `postgresql://` with the `postgres` feature,
/// `sqlite://`, `sqlite:` or `file:` with the `sqlite` feature, `mysql://` or `mariadb://`
/// with the `mysql` feature). For the CLI, the demo and anything that takes a URL from its
/// environment.
pub fn driver_for_url(url: &str, max_connections: usize) -> Result<Arc<dyn Driver>> {
    // A URL copied from a `.env` file may keep its spaces.
    let url = url.trim();
    let scheme = url
        .split_once(':')
        .map(|(scheme, _)| scheme)
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+'))
        .unwrap_or("");
    if let Some(opener) = OPENERS.iter().find(|o| o.schemes.contains(&scheme)) {
        return Ok((opener.open)(url, max_connections)?);
    }
    let known = driver_url_examples();
    // Not echoed: the URL may hold a password.
    Err(Error::InvalidOption {
        option: "database_url",
        reason: if scheme.is_empty() {
            format!(
                "the URL has no scheme{}; this build reads: {}",
                if url.starts_with(['"', '\'']) { " (it is in quotes: remove them)" } else { "" },
                known.join(", ")
            )
        } else {
            format!("no driver for `{scheme}:` URLs in this build; it reads: {}", known.join(", "))
        },
    })
}

/// Postgres's pool, which the engine takes wherever a driver goes.
#[cfg(feature = "postgres")]
mod postgres_pool {
    use std::sync::Arc;

    use jobs_driver::{Driver, Inserted, InsertedWorkflow, JobInsertWorkflowParams, NewJob, NewWorkflow};

    use crate::enqueue::Enqueuer;
    use crate::error::Result;
    use crate::into_driver::IntoDriver;

    /// Wrapped in a [`PgDriver`](jobs_postgres::PgDriver).
    impl IntoDriver for jobs_postgres::Pool {
        fn into_driver(self) -> Arc<dyn Driver> {
            Arc::new(jobs_postgres::PgDriver::new(self))
        }
    }

    /// A clone of the pool, wrapped in a [`PgDriver`](jobs_postgres::PgDriver).
    impl IntoDriver for &jobs_postgres::Pool {
        fn into_driver(self) -> Arc<dyn Driver> {
            self.clone().into_driver()
        }
    }

    /// A pooled connection is not in a transaction: the insert commits by itself and
    /// returns. Its wake-up is rationed per queue (`jobs_postgres::wakeups`): the first
    /// insert of a window notifies from its own statement; later ones in the window get one
    /// trailing wake-up at its end.
    impl Enqueuer for &jobs_postgres::Pool {
        async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
            Ok(jobs_postgres::wakeups::insert_through_pool(self, jobs, None).await?)
        }

        async fn insert_workflow(self, workflow: &NewWorkflow) -> Result<InsertedWorkflow> {
            let driver = jobs_postgres::PgDriver::new(self.clone());
            Ok(driver.job_insert_workflow(JobInsertWorkflowParams { workflow, now: None }).await?)
        }

        async fn change_batch(self, change: &jobs_driver::BatchChange) -> Result<jobs_driver::BatchChanged> {
            let driver = jobs_postgres::PgDriver::new(self.clone());
            Ok(driver.job_batch(jobs_driver::JobBatchParams { change, now: None }).await?)
        }
    }
}

/// The throwaway servers and databases of the drivers of the build, for
/// [`testing`](crate::testing).
#[cfg(feature = "testing")]
pub(crate) mod testing {
    /// A migrated database per test on a throwaway MariaDB server (feature `mysql`).
    #[cfg(feature = "mysql")]
    pub use jobs_mysql::testing::TestDatabase as MysqlTestDatabase;
    #[cfg(feature = "postgres")]
    pub use jobs_postgres::testing::{PgBouncer, PgCluster, Server, TestDatabase, cluster, replace_database};
    /// A migrated SQLite database file per test (feature `sqlite`).
    #[cfg(feature = "sqlite")]
    pub use jobs_sqlite::testing::TestDatabase as SqliteTestDatabase;
}
