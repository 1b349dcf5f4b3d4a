//! Test support: a throwaway MariaDB (or MySQL) server, and a migrated database per test.

mod binaries;
mod server;

pub use binaries::{BIN_DIR_VAR, Flavor, MYSQL_BIN_DIR_VAR, ServerBinaries, find_server_binaries};
pub use server::{BENCH_SETTINGS, LocalServer, TEST_SETTINGS};

use std::sync::atomic::{AtomicU32, Ordering};

use diesel_async::{AsyncMysqlConnection, SimpleAsyncConnection};
use jobs_driver::Result;
pub use jobs_driver::test_server::replace_database;

use crate::driver::MysqlDriver;
use crate::pool::{self, Pool};

/// The variable naming a MySQL or MariaDB server to create test databases on
/// (`mysql://root@127.0.0.1:3306/mysql`: a user allowed to create databases). Unset, the
/// tests start a throwaway server of their own: MariaDB, or MySQL with `JOBS_MYSQL_BIN`.
pub const URL_VAR: &str = "MYSQL_URL";

/// Where test databases are created: the server `MYSQL_URL` names, or the shared
/// throwaway server.
#[derive(Debug, Clone)]
pub struct Server {
    admin_url: String,
}

impl Server {
    /// `MYSQL_URL` if set, otherwise the shared throwaway server (started on first use).
    pub async fn from_env() -> Result<Server> {
        if let Ok(url) = std::env::var(URL_VAR)
            && !url.is_empty()
        {
            return Ok(Server { admin_url: url });
        }
        let server = tokio::task::spawn_blocking(LocalServer::shared)
            .await
            .map_err(|e| jobs_driver::DriverError::Server(format!("server start-up task failed: {e}")))??;
        Ok(Server { admin_url: server.url("mysql") })
    }

    /// A server reached through `admin_url`.
    pub fn new(admin_url: impl Into<String>) -> Server {
        Server { admin_url: admin_url.into() }
    }

    /// The URL of another database on the same server.
    pub fn url_for(&self, database: &str) -> String {
        replace_database(&self.admin_url, database)
    }
}

/// A fresh, migrated database of its own on the test server.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    name: String,
}

impl TestDatabase {
    /// Creates and migrates a database on [`Server::from_env`]. Needs tokio's multi-thread
    /// runtime (migrations).
    pub async fn new() -> Result<TestDatabase> {
        TestDatabase::on(&Server::from_env().await?).await
    }

    /// Creates and migrates a database on `server`.
    pub async fn on(server: &Server) -> Result<TestDatabase> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "jobs_test_{}_{}_{:06x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>() & 0xff_ffff
        );
        let mut admin = pool::connect(&server.admin_url).await?;
        admin.batch_execute(&format!("CREATE DATABASE `{name}`")).await?;
        let url = server.url_for(&name);
        crate::migrate::migrate(pool::connect(&url).await?).await?;
        Ok(TestDatabase { url, name })
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A pool of `max_size` connections to the database.
    pub fn pool(&self, max_size: usize) -> Result<Pool> {
        pool::pool(&self.url, max_size)
    }

    /// A driver on a pool of `max_size` connections to the database.
    pub fn driver(&self, max_size: usize) -> Result<MysqlDriver> {
        MysqlDriver::open(&self.url, max_size)
    }

    /// Opens a connection to the database.
    pub async fn connect(&self) -> Result<AsyncMysqlConnection> {
        pool::connect(&self.url).await
    }
}
