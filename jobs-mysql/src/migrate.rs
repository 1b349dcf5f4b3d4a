//! The embedded schema migrations (the crate's `migrations/`).
//!
//! MySQL commits each DDL statement by itself, so a migration that fails halfway leaves
//! what it created: the migrations are written to be re-run (each file one step), and
//! concurrent migrators are serialised by a named lock (`GET_LOCK`), held by the
//! migrating session until it is done.

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{Integer, Nullable, Text};
use diesel_async::{AsyncConnection, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use jobs_driver::schema_migrations::{Harness, blocking};
use jobs_driver::{DriverError as Error, Result};

/// The SQL migrations from the crate's `migrations/` folder, compiled in.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// A table by name in the connection's database (see [`Harness::new`]).
const TABLE_EXISTS: &str = "SELECT CAST(table_name AS CHAR) AS name FROM information_schema.tables \
     WHERE table_schema = DATABASE() AND table_name = '{table}'";

/// The named lock every migrating process takes.
const LOCK: &str = "jobs_migrate";

/// How long a migrator waits for another to finish, in seconds.
const LOCK_WAIT_SECS: i32 = 120;

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Nullable<Integer>)]
    locked: Option<i32>,
}

/// Applies every pending migration and returns the versions it applied (none when the
/// schema is current). Takes the connection by value: an `AsyncMysqlConnection` or
/// `pool.get().await?`. Needs tokio's multi-thread runtime (diesel's harness blocks).
pub async fn migrate<C>(conn: C) -> Result<Vec<String>>
where
    C: AsyncConnection<Backend = Mysql> + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {}
        _ => {
            return Err(Error::Runtime(
                "migrations need tokio's multi-thread runtime (diesel's migration harness blocks); use \
                 #[tokio::main] or #[tokio::test(flavor = \"multi_thread\")]"
                    .into(),
            ));
        }
    }
    let mut conn = conn;
    let locked: Locked = diesel::sql_query("SELECT GET_LOCK(?, ?) AS locked")
        .bind::<Text, _>(LOCK)
        .bind::<Integer, _>(LOCK_WAIT_SECS)
        .get_result(&mut conn)
        .await?;
    if locked.locked != Some(1) {
        return Err(Error::Migration(format!(
            "another process held the migration lock `{LOCK}` for {LOCK_WAIT_SECS} s"
        )));
    }
    // Recorded in `jobs_schema_migrations`, the framework's versions moved there from
    // diesel's table first.
    let (mut conn, outcome) = blocking(conn, |conn| {
        let mut harness = Harness::new(conn, &MIGRATIONS, TABLE_EXISTS)?;
        harness.adopt()?;
        harness
            .run_pending_migrations(MIGRATIONS)
            .map(|versions| versions.iter().map(ToString::to_string).collect::<Vec<_>>())
            .map_err(|e| Error::Migration(e.to_string()))
    });
    diesel::sql_query("SELECT RELEASE_LOCK(?)").bind::<Text, _>(LOCK).execute(&mut conn).await?;
    outcome
}
