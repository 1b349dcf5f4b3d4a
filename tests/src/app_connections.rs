//! Connections of an application's own for the conformance suite's transactional cases
//! (`TestDb::begin`, `TestDb::begin_sync`), per backend: the suite names none.

use diesel::Connection;
use jobs_conformance::app_transaction::{Begin, BeginSync, begin, begin_sync};

/// Transactions on `AsyncPgConnection`s to `url`.
pub fn postgres(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn = <diesel_async::AsyncPgConnection as diesel_async::AsyncConnection>::establish(&url)
                .await
                .expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// Transactions on async connections to `url` through a pooler in transaction mode, made
/// as `docs/production-postgres.md` says (`pooler::connect`: set-up inside a transaction,
/// no statement cache).
pub fn postgres_through_pooler(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn = jobs_core::postgres::pooler::connect(&url).await.expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// Transactions on `PgConnection`s (sync diesel) to `url`.
pub fn postgres_sync(url: String) -> BeginSync {
    Box::new(move || {
        let conn = diesel::PgConnection::establish(&url).expect("an application connection");
        begin_sync(conn).expect("begin")
    })
}

/// Transactions on `PgConnection`s to `url` through a pooler in transaction mode, their
/// statement cache off as `docs/production-postgres.md` says (with it on, the second
/// connection that meets a server connection fails: "prepared statement
/// \"__diesel_stmt_1\" already exists").
pub fn postgres_sync_through_pooler(url: String) -> BeginSync {
    Box::new(move || {
        let mut conn = diesel::PgConnection::establish(&url).expect("an application connection");
        conn.set_prepared_statement_cache_size(diesel::connection::CacheSize::Disabled);
        begin_sync(conn).expect("begin")
    })
}

/// Transactions on the async SQLite connections of `url`.
pub fn sqlite(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn = jobs_core::sqlite::connect(&url).await.expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// Transactions on `SqliteConnection`s (sync diesel) to the file of `url`.
pub fn sqlite_sync(url: String) -> BeginSync {
    Box::new(move || {
        let path = jobs_core::sqlite::database_path(&url).expect("a SQLite URL");
        let conn = jobs_core::sqlite::connect_sync(&path).expect("an application connection");
        begin_sync(conn).expect("begin")
    })
}

/// Transactions on `AsyncMysqlConnection`s to `url`.
pub fn mysql(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn = <diesel_async::AsyncMysqlConnection as diesel_async::AsyncConnection>::establish(&url)
                .await
                .expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// Transactions on `MysqlConnection`s (sync diesel) to `url`.
pub fn mysql_sync(url: String) -> BeginSync {
    Box::new(move || {
        let conn = diesel::MysqlConnection::establish(&url).expect("an application connection");
        begin_sync(conn).expect("begin")
    })
}
