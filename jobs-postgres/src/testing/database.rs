//! A fresh, migrated database for each test.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};

use diesel_async::AsyncPgConnection;
pub use jobs_driver::test_server::replace_database;
use jobs_driver::{DriverError as Error, Result};

use super::admin;
use crate::driver::PgDriver;
use crate::migrate::{MIGRATIONS_HASH, migrate};
use crate::pool::{self, Pool};

use super::cluster::PgCluster;

/// Where test databases are created: the server named by `DATABASE_URL`, or else the
/// shared throwaway cluster.
#[derive(Debug, Clone)]
pub struct Server {
    admin_url: String,
}

impl Server {
    /// `DATABASE_URL` if set, otherwise the shared throwaway cluster (started on first use).
    pub async fn from_env() -> Result<Server> {
        if let Ok(url) = std::env::var("DATABASE_URL")
            && !url.is_empty()
        {
            return Ok(Server { admin_url: url });
        }
        let cluster = tokio::task::spawn_blocking(PgCluster::shared)
            .await
            .map_err(|e| Error::Server(format!("cluster start-up task failed: {e}")))??;
        Ok(Server { admin_url: cluster.admin_url() })
    }

    /// A server reached through `admin_url`, a URL whose database may be used to create
    /// and drop others.
    pub fn new(admin_url: impl Into<String>) -> Server {
        Server { admin_url: admin_url.into() }
    }

    /// The URL of the maintenance database.
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The URL of another database on the same server.
    pub fn url_for(&self, database: &str) -> String {
        replace_database(&self.admin_url, database)
    }
}

/// The migrated template test databases are copied from, named after the migrations'
/// hash (and the harness's layout: `s2`, the versions in `jobs_schema_migrations`) so a
/// changed migration gets a new template. Built once per server and process.
async fn ensure_template(server: &Server) -> Result<String> {
    static READY: std::sync::OnceLock<tokio::sync::Mutex<HashSet<String>>> = std::sync::OnceLock::new();
    let template = format!("jobs_tpl_s2_{MIGRATIONS_HASH}");
    let mut ready = READY.get_or_init(Default::default).lock().await;
    if ready.contains(server.admin_url()) {
        return Ok(template);
    }
    let mut admin = pool::connect(server.admin_url()).await?;
    admin::advisory_lock(&mut admin, "jobs-test-template").await?;
    let outcome = async {
        if !admin::database_exists(&mut admin, &template).await? {
            let building = format!("{template}_building");
            admin::drop_database(&mut admin, &building).await?;
            admin::create_database(&mut admin, &building, None).await?;
            migrate_on_own_runtime(server.url_for(&building)).await?;
            admin::rename_database(&mut admin, &building, &template).await?;
        }
        Ok::<_, Error>(())
    }
    .await;
    admin::advisory_unlock(&mut admin, "jobs-test-template").await?;
    outcome?;
    ready.insert(server.admin_url().to_owned());
    Ok(template)
}

/// Runs the migrations on a multi-thread runtime of their own (the harness needs one), so
/// that tests on any runtime flavour (`#[actix_web::test]`, `#[tokio::test]`) can build the
/// template.
async fn migrate_on_own_runtime(url: String) -> Result<()> {
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(format!("cannot start a runtime for migrations: {e}")))?;
        runtime.block_on(async { migrate(pool::connect(&url).await?).await.map(|_| ()) })
    });
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .map_err(|e| Error::Runtime(format!("migration thread: {e}")))?
        .map_err(|_| Error::Runtime("the migration thread panicked".into()))?
}

/// A database of its own for one test: created on [`TestDatabase::new`], dropped (with
/// any sessions still connected) when the value is dropped.
///
/// Copying a migrated template takes a few milliseconds, so every test can have one and
/// tests run in parallel without seeing each other's rows.
#[derive(Debug)]
pub struct TestDatabase {
    server: Server,
    name: String,
    url: String,
}

impl TestDatabase {
    /// A new database with the jobs schema migrated.
    pub async fn new() -> Result<TestDatabase> {
        let server = Server::from_env().await?;
        let template = ensure_template(&server).await?;
        TestDatabase::create(server, Some(template)).await
    }

    /// A new database with the jobs schema migrated, on `server` (for example a private
    /// [`PgCluster`] a test restarts).
    pub async fn on(server: Server) -> Result<TestDatabase> {
        let template = ensure_template(&server).await?;
        TestDatabase::create(server, Some(template)).await
    }

    /// A new database with no schema at all (for migration tests).
    pub async fn empty() -> Result<TestDatabase> {
        let server = Server::from_env().await?;
        TestDatabase::create(server, None).await
    }

    async fn create(server: Server, template: Option<String>) -> Result<TestDatabase> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "jobs_test_{}_{}_{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        );
        let mut admin = pool::connect(server.admin_url()).await?;
        // Two sessions copying the same template at the same instant can collide
        // ("source database is being accessed by other users"); retry briefly.
        let mut attempt = 0;
        loop {
            match admin::create_database(&mut admin, &name, template.as_deref()).await {
                Ok(()) => break,
                Err(e) if attempt < 50 && e.to_string().contains("being accessed by other users") => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 + attempt * 10)).await;
                }
                Err(e) => return Err(e),
            }
        }
        let url = server.url_for(&name);
        Ok(TestDatabase { server, name, url })
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A connection URL for the database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Opens a connection to the database.
    pub async fn connect(&self) -> Result<AsyncPgConnection> {
        pool::connect(&self.url).await
    }

    /// A connection pool for the database.
    pub fn pool(&self, max_size: usize) -> Result<Pool> {
        pool::pool(&self.url, max_size)
    }

    /// A driver on a pool of `max_size` connections to the database.
    pub fn driver(&self, max_size: usize) -> Result<PgDriver> {
        Ok(PgDriver::new(self.pool(max_size)?))
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin_url = self.server.admin_url().to_owned();
        let name = std::mem::take(&mut self.name);
        // Drop runs in sync code, perhaps inside a runtime: use a thread of its own.
        let dropper = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async {
                    if let Ok(mut admin) = pool::connect(&admin_url).await {
                        let _ = admin::drop_database(&mut admin, &name).await;
                    }
                });
            }
        });
        let _ = dropper.join();
    }
}
