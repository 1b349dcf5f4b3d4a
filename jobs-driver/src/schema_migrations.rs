//! Where a driver records its applied migrations: a table of its own,
//! `jobs_schema_migrations`, beside the application's `__diesel_schema_migrations`, so
//! that the application's own `diesel migration run`, `revert` and `redo` see only its
//! migrations (with the framework's in diesel's table, later-dated, `revert` looked for
//! the framework's newest one among the application's files and failed).
//!
//! [`Harness`] runs a driver's embedded migrations through diesel's
//! [`MigrationHarness`] on any diesel connection (an async one through diesel-async's
//! `AsyncConnectionWrapper`). A database migrated before this table existed has the
//! framework's versions in diesel's table: [`Harness::adopt`] moves them across (the
//! versions of this build's migrations only; the application's stay).

use diesel::QueryableByName;
use diesel::connection::Connection;
use diesel::migration::{Migration, MigrationSource, MigrationVersion};
use diesel::query_builder::SqlQuery;
use diesel::query_dsl::RunQueryDsl;
use diesel::query_dsl::methods::LoadQuery;
use diesel::sql_types::Text;
use diesel_migrations::MigrationHarness;

use crate::error::{DriverError, Result};

/// The table a driver records its applied migrations in.
pub const TABLE: &str = "jobs_schema_migrations";

/// diesel's own table, where the application's migrations are recorded (and, before
/// [`TABLE`], the framework's were).
pub const DIESEL_TABLE: &str = "__diesel_schema_migrations";

type MigrationResult<T> = diesel::migration::Result<T>;

/// An async connection as diesel's (blocking) migration harness takes it.
pub type Blocking<C> = diesel_async::async_connection_wrapper::AsyncConnectionWrapper<C>;

/// Runs `f` on `conn` wrapped for diesel's blocking migration harness, on tokio's
/// multi-thread runtime (`block_in_place`: the caller checks the runtime's flavour), and
/// gives the connection back with `f`'s result.
pub fn blocking<C, T>(conn: C, f: impl FnOnce(&mut Blocking<C>) -> Result<T>) -> (C, Result<T>)
where
    C: diesel_async::AsyncConnection + 'static,
{
    let mut wrapped = Blocking::from(conn);
    let outcome = tokio::task::block_in_place(|| f(&mut wrapped));
    (wrapped.into_inner(), outcome)
}

/// A row with one text column named `name`.
#[derive(QueryableByName)]
pub struct Name {
    /// The value.
    #[diesel(sql_type = Text)]
    pub name: String,
}

/// Runs a driver's migrations on `conn`, recording them in [`TABLE`].
pub struct Harness<'a, C> {
    conn: &'a mut C,
    /// The versions of this build's migrations (digits only).
    ours: Vec<String>,
    /// A query returning one row (`name`) when the table named `{table}` in it exists,
    /// none otherwise: the backend's catalog (`pg_tables`, `information_schema.tables`,
    /// `sqlite_master`).
    table_exists: &'static str,
}

impl<'a, C> Harness<'a, C>
where
    C: Connection + 'static,
    for<'q> SqlQuery: LoadQuery<'q, C, Name>,
{
    /// A harness for `source`'s migrations on `conn`. `table_exists` is the backend's
    /// query for a table by name: one row (a text column `name`) when the table
    /// `{table}` exists, none otherwise.
    pub fn new<S: MigrationSource<C::Backend>>(
        conn: &'a mut C,
        source: &S,
        table_exists: &'static str,
    ) -> Result<Self> {
        let migrations = source.migrations().map_err(|e| DriverError::Migration(e.to_string()))?;
        let ours: Vec<String> = migrations.iter().map(|m| m.name().version().to_string()).collect();
        if let Some(odd) = ours.iter().find(|v| v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit())) {
            return Err(DriverError::Migration(format!("migration version `{odd}` is not all digits")));
        }
        Ok(Harness { conn, ours, table_exists })
    }

    /// The versions as a SQL list: `'1', '2'` (digits only, checked by [`Harness::new`]).
    fn ours_sql(&self) -> String {
        self.ours.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ")
    }

    fn versions_in(&mut self, table: &str) -> Result<Vec<String>> {
        if self.ours.is_empty() {
            return Ok(Vec::new());
        }
        let list = self.ours_sql();
        let sql = format!("SELECT version AS name FROM {table} WHERE version IN ({list})");
        let rows: Vec<Name> = diesel::sql_query(sql).load(self.conn)?;
        Ok(rows.into_iter().map(|r| r.name).collect())
    }

    fn exists(&mut self, table: &str) -> Result<bool> {
        let rows: Vec<Name> =
            diesel::sql_query(self.table_exists.replace("{table}", table)).load(self.conn)?;
        Ok(!rows.is_empty())
    }

    /// Creates [`TABLE`] when missing and moves this build's versions out of diesel's
    /// table into it (a database migrated before [`TABLE`]). Call it under the driver's
    /// migration lock, before [`MigrationHarness::run_pending_migrations`].
    pub fn adopt(&mut self) -> Result<()> {
        self.conn.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {TABLE} (version VARCHAR(50) NOT NULL PRIMARY KEY, \
             run_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        ))?;
        if self.ours.is_empty() || !self.exists(DIESEL_TABLE)? {
            return Ok(());
        }
        let legacy = self.versions_in(DIESEL_TABLE)?;
        if legacy.is_empty() {
            return Ok(());
        }
        let recorded = self.versions_in(TABLE)?;
        for version in legacy.iter().filter(|v| !recorded.contains(v)) {
            self.conn.batch_execute(&format!("INSERT INTO {TABLE} (version) VALUES ('{version}')"))?;
        }
        let list = self.ours_sql();
        self.conn.batch_execute(&format!("DELETE FROM {DIESEL_TABLE} WHERE version IN ({list})"))?;
        Ok(())
    }

    /// Drops [`TABLE`] once every migration was reverted; refuses while it still records
    /// versions this build does not know (a newer build's: their tables are still there).
    pub fn drop_table(&mut self) -> Result<()> {
        let left: Vec<Name> =
            diesel::sql_query(format!("SELECT version AS name FROM {TABLE}")).load(self.conn)?;
        if !left.is_empty() {
            let left: Vec<String> = left.into_iter().map(|r| r.name).collect();
            return Err(DriverError::Migration(format!(
                "{TABLE} still records migrations this build does not know ({}): a newer build applied them; \
                 revert with that build",
                left.join(", ")
            )));
        }
        self.conn.batch_execute(&format!("DROP TABLE IF EXISTS {TABLE}"))?;
        Ok(())
    }
}

impl<C> MigrationHarness<C::Backend> for Harness<'_, C>
where
    C: Connection + 'static,
    for<'q> SqlQuery: LoadQuery<'q, C, Name>,
{
    fn run_migration(
        &mut self,
        migration: &dyn Migration<C::Backend>,
    ) -> MigrationResult<MigrationVersion<'static>> {
        let version = migration.name().version().as_owned();
        let record = format!("INSERT INTO {TABLE} (version) VALUES ('{version}')");
        let apply = |conn: &mut C| -> MigrationResult<()> {
            migration.run(conn)?;
            conn.batch_execute(&record)?;
            Ok(())
        };
        if migration.metadata().run_in_transaction() {
            self.conn.transaction(apply)?;
        } else {
            apply(self.conn)?;
        }
        Ok(version)
    }

    fn revert_migration(
        &mut self,
        migration: &dyn Migration<C::Backend>,
    ) -> MigrationResult<MigrationVersion<'static>> {
        let version = migration.name().version().as_owned();
        let forget = format!("DELETE FROM {TABLE} WHERE version = '{version}'");
        let revert = |conn: &mut C| -> MigrationResult<()> {
            migration.revert(conn)?;
            conn.batch_execute(&forget)?;
            Ok(())
        };
        if migration.metadata().run_in_transaction() {
            self.conn.transaction(revert)?;
        } else {
            revert(self.conn)?;
        }
        Ok(version)
    }

    /// This build's versions recorded in [`TABLE`], and those still in diesel's table (a
    /// database not yet adopted), newest first.
    fn applied_migrations(&mut self) -> MigrationResult<Vec<MigrationVersion<'static>>> {
        let mut applied = Vec::new();
        if self.exists(TABLE)? {
            applied.extend(self.versions_in(TABLE)?);
        }
        if self.exists(DIESEL_TABLE)? {
            applied.extend(self.versions_in(DIESEL_TABLE)?);
        }
        applied.sort_unstable_by(|a, b| b.cmp(a));
        applied.dedup();
        Ok(applied.into_iter().map(MigrationVersion::from).collect())
    }
}
