//! Running the embedded schema migrations from Rust.

use diesel::pg::Pg;
use diesel_async::{AsyncConnection, TransactionManager};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use jobs_driver::schema_migrations::{Blocking, Harness, blocking};
use jobs_driver::{DriverError as Error, Result};

use crate::migration_lock;

/// The SQL migrations from the crate's `migrations/` folder, compiled in.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// A hash of the migration files' contents, computed at build time.
pub const MIGRATIONS_HASH: &str = env!("JOBS_MIGRATIONS_HASH");

/// A connection the migration harness can drive: an owned `AsyncPgConnection`, or a
/// connection checked out of a pool (`pool.get().await?`).
pub trait MigrationConnection: AsyncConnection<Backend = Pg> + 'static {}
impl<C: AsyncConnection<Backend = Pg> + 'static> MigrationConnection for C {}

fn needs_multi_thread() -> Result<()> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => Ok(()),
        Ok(_) => Err(Error::Runtime(
            "migrations need tokio's multi-thread runtime (they run diesel's blocking \
             migration harness through block_in_place); use #[tokio::main] or \
             #[tokio::test(flavor = \"multi_thread\")]"
                .into(),
        )),
        Err(_) => Err(Error::Runtime("migrations must run inside a tokio runtime".into())),
    }
}

/// A table by name in the connection's search path (see [`Harness::new`]).
const TABLE_EXISTS: &str = "SELECT tablename::text AS name FROM pg_tables \
     WHERE tablename = '{table}' AND schemaname = ANY (current_schemas(false))";

enum Direction {
    Up,
    DownAll,
}

/// The migrations run `direction` on `conn`, recorded in `jobs_schema_migrations` (the
/// framework's versions moved there from diesel's table first).
fn apply<C: MigrationConnection>(conn: &mut Blocking<C>, direction: Direction) -> Result<Vec<String>> {
    let mut harness = Harness::new(conn, &MIGRATIONS, TABLE_EXISTS)?;
    harness.adopt()?;
    let done = match direction {
        Direction::Up => harness.run_pending_migrations(MIGRATIONS),
        Direction::DownAll => harness.revert_all_migrations(MIGRATIONS),
    }
    .map(|versions| versions.iter().map(ToString::to_string).collect::<Vec<_>>())
    .map_err(|e| Error::Migration(e.to_string()))?;
    if matches!(direction, Direction::DownAll) {
        harness.drop_table()?;
    }
    Ok(done)
}

async fn run<C: MigrationConnection>(conn: C, direction: Direction) -> Result<Vec<String>> {
    needs_multi_thread()?;
    let mut conn = conn;
    migration_lock::lock(&mut conn).await?;
    let (mut conn, outcome) = blocking(conn, |conn| apply(conn, direction));
    migration_lock::unlock(&mut conn).await?;
    outcome
}

/// Applies every pending migration and returns the versions it applied (none when the
/// schema is current, so calling it on every start is cheap and safe).
///
/// Takes the connection by value: pass an `AsyncPgConnection` or `pool.get().await?`.
/// Several processes may call this at once: a session advisory lock lets one migrate while
/// the others wait, then find nothing left to do. Needs tokio's multi-thread runtime.
pub async fn migrate<C: MigrationConnection>(conn: C) -> Result<Vec<String>> {
    run(conn, Direction::Up).await
}

/// [`migrate`] through a pooler in transaction mode (PgBouncer): a session advisory lock
/// would stay on whichever server connection took it, so the migrations run in a
/// transaction that holds a transaction-level lock instead (each migration is a savepoint
/// in it). A migration marked to run outside a transaction (`ALTER TYPE … ADD VALUE`, whose
/// value no statement may use before it commits) ends its transaction: the next ones run
/// in another, under the lock again. Pass a connection from
/// [`pooler::pool`](crate::pooler::pool) or [`pooler::connect`](crate::pooler::connect).
pub async fn migrate_in_one_transaction<C: MigrationConnection>(conn: C) -> Result<Vec<String>> {
    needs_multi_thread()?;
    let mut conn = conn;
    let mut applied = Vec::new();
    loop {
        C::TransactionManager::begin_transaction(&mut conn).await?;
        let locked = migration_lock::lock_for_transaction(&mut conn).await;
        let (back, outcome) = match locked {
            Ok(()) => blocking(conn, apply_up_to_barrier),
            Err(e) => (conn, Err(e)),
        };
        conn = back;
        match outcome {
            Ok((done, more)) => {
                C::TransactionManager::commit_transaction(&mut conn).await?;
                applied.extend(done);
                if !more {
                    return Ok(applied);
                }
            }
            Err(e) => {
                let _ = C::TransactionManager::rollback_transaction(&mut conn).await;
                return Err(e);
            }
        }
    }
}

/// The pending migrations applied in order up to and including the first marked to run
/// outside a transaction; the versions applied, and whether others remain.
fn apply_up_to_barrier<C: MigrationConnection>(conn: &mut Blocking<C>) -> Result<(Vec<String>, bool)> {
    let mut harness = Harness::new(conn, &MIGRATIONS, TABLE_EXISTS)?;
    harness.adopt()?;
    let pending = harness.pending_migrations(MIGRATIONS).map_err(|e| Error::Migration(e.to_string()))?;
    let mut applied = Vec::new();
    for (i, migration) in pending.iter().enumerate() {
        let version = harness.run_migration(&**migration).map_err(|e| Error::Migration(e.to_string()))?;
        applied.push(version.to_string());
        if !migration.metadata().run_in_transaction() {
            return Ok((applied, i + 1 < pending.len()));
        }
    }
    Ok((applied, false))
}

/// Reverts every applied migration, leaving no trace of the schema. Destroys all jobs.
pub async fn revert_all<C: MigrationConnection>(conn: C) -> Result<Vec<String>> {
    run(conn, Direction::DownAll).await
}

/// The names of the migrations not applied yet.
pub async fn pending<C: MigrationConnection>(conn: C) -> Result<Vec<String>> {
    needs_multi_thread()?;
    let (_, outcome) = blocking(conn, |conn| {
        Harness::new(conn, &MIGRATIONS, TABLE_EXISTS)?
            .pending_migrations(MIGRATIONS)
            .map(|list| list.iter().map(|m| m.name().to_string()).collect())
            .map_err(|e| Error::Migration(e.to_string()))
    });
    outcome
}

/// The versions of every migration compiled into this build, oldest first.
pub fn versions() -> Result<Vec<String>> {
    use diesel::migration::MigrationSource;
    let migrations =
        MigrationSource::<Pg>::migrations(&MIGRATIONS).map_err(|e| Error::Migration(e.to_string()))?;
    Ok(migrations.iter().map(|m| m.name().version().to_string()).collect())
}
