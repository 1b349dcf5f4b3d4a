//! Connections of an application's own for the conformance suite's transactional cases,
//! where a backend's need more than `establish` (see `jobs_conformance::app_transaction`:
//! `connecting::<C>(url)` opens the plain ones).

use diesel::Connection;
use jobs_conformance::app_transaction::{Begin, BeginSync, begin_sync_with, begin_with};

/// Transactions on async connections to `url` through a pooler in transaction mode, made
/// as `docs/production-postgres.md` says (`pooler::connect`: set-up inside a transaction,
/// no statement cache).
pub fn postgres_through_pooler(url: String) -> Begin {
    begin_with(url, |url| async move { Ok(jobs_core::postgres::pooler::connect(&url).await?) })
}

/// Transactions on `PgConnection`s to `url` through a pooler in transaction mode, their
/// statement cache off as `docs/production-postgres.md` says (with it on, the second
/// connection that meets a server connection fails: "prepared statement
/// \"__diesel_stmt_1\" already exists").
pub fn postgres_sync_through_pooler(url: String) -> BeginSync {
    begin_sync_with(url, |url| {
        let mut conn = diesel::PgConnection::establish(url)?;
        conn.set_prepared_statement_cache_size(diesel::connection::CacheSize::Disabled);
        Ok(conn)
    })
}

/// Transactions on the async SQLite connections of `url`, with the driver's pragmas (busy
/// timeout, WAL).
pub fn sqlite(url: String) -> Begin {
    begin_with(url, |url| async move { Ok(jobs_core::sqlite::connect(&url).await?) })
}

/// Transactions on `SqliteConnection`s (sync diesel) to the file of `url`, with the
/// driver's pragmas.
pub fn sqlite_sync(url: String) -> BeginSync {
    begin_sync_with(url, |url| Ok(jobs_core::sqlite::connect_sync(&jobs_core::sqlite::database_path(url)?)?))
}
