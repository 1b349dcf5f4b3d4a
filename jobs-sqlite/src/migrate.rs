//! The embedded schema migrations (the crate's `migrations/`).

use diesel::SqliteConnection;
use diesel::sqlite::Sqlite;
use diesel_async::AsyncConnection;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use jobs_driver::schema_migrations::{Harness, blocking};
use jobs_driver::{DriverError as Error, Result};

/// The SQL migrations from the crate's `migrations/` folder, compiled in.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// A table by name (see [`Harness::new`]).
const TABLE_EXISTS: &str = "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '{table}'";

/// Applies every pending migration on a synchronous connection, in one immediate
/// transaction: a second process migrating at the same moment waits for the write lock,
/// then finds nothing left to do. Returns the versions applied.
pub fn migrate_sync(conn: &mut SqliteConnection) -> Result<Vec<String>> {
    conn.immediate_transaction(run_pending)
}

/// Applies every pending migration in whatever transaction `conn` is in, recorded in
/// `jobs_schema_migrations` (the framework's versions moved there from diesel's table
/// first).
pub(crate) fn run_pending<C>(conn: &mut C) -> Result<Vec<String>>
where
    C: diesel::Connection<Backend = Sqlite> + diesel::connection::LoadConnection + 'static,
{
    let mut harness = Harness::new(conn, &MIGRATIONS, TABLE_EXISTS)?;
    harness.adopt()?;
    harness
        .run_pending_migrations(MIGRATIONS)
        .map(|versions| versions.iter().map(ToString::to_string).collect())
        .map_err(|e| Error::Migration(e.to_string()))
}

/// Applies every pending migration on an async connection of the application's. Needs
/// tokio's multi-thread runtime (diesel's harness blocks); the driver's own
/// `Driver::migrate` runs on its blocking threads and needs no such runtime. Unlike
/// `Driver::migrate` and [`migrate_sync`], it takes no lock: let one process migrate.
pub async fn migrate<C>(conn: C) -> Result<Vec<String>>
where
    C: AsyncConnection<Backend = Sqlite> + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {}
        _ => {
            return Err(Error::Runtime(
                "migrating on an application's async SQLite connection needs tokio's multi-thread runtime; \
                 `SqliteDriver::migrate` works on any"
                    .into(),
            ));
        }
    }
    blocking(conn, run_pending).1
}
