//! Database-level administration: creating and dropping whole databases (test support,
//! the demo) and the server settings the health check reports.

use diesel::sql_types::{BigInt, Text};
use diesel::{OptionalExtension, QueryableByName};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::error::Result;

/// Quotes an identifier for the few statements (CREATE/DROP DATABASE) that cannot take it
/// as a bound parameter.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[derive(QueryableByName)]
struct One {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Whether a database of this name exists on the server.
pub async fn database_exists(conn: &mut AsyncPgConnection, name: &str) -> Result<bool> {
    let found: Option<One> = diesel::sql_query("SELECT 1::bigint AS n FROM pg_database WHERE datname = $1")
        .bind::<Text, _>(name)
        .get_result(conn)
        .await
        .optional()?;
    Ok(found.is_some_and(|one| one.n == 1))
}

/// `CREATE DATABASE name [TEMPLATE template]`.
pub async fn create_database(conn: &mut AsyncPgConnection, name: &str, template: Option<&str>) -> Result<()> {
    let sql = match template {
        Some(template) => format!("CREATE DATABASE {} TEMPLATE {}", quote_ident(name), quote_ident(template)),
        None => format!("CREATE DATABASE {}", quote_ident(name)),
    };
    diesel::sql_query(sql).execute(conn).await?;
    Ok(())
}

/// `DROP DATABASE IF EXISTS name WITH (FORCE)`: also ends the sessions still connected.
pub async fn drop_database(conn: &mut AsyncPgConnection, name: &str) -> Result<()> {
    diesel::sql_query(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_ident(name)))
        .execute(conn)
        .await?;
    Ok(())
}

/// `ALTER DATABASE from RENAME TO to`.
pub async fn rename_database(conn: &mut AsyncPgConnection, from: &str, to: &str) -> Result<()> {
    diesel::sql_query(format!("ALTER DATABASE {} RENAME TO {}", quote_ident(from), quote_ident(to)))
        .execute(conn)
        .await?;
    Ok(())
}

/// Waits for, then takes, a session-level advisory lock keyed by `key`'s hash.
pub async fn advisory_lock(conn: &mut AsyncPgConnection, key: &str) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_lock(hashtext($1))").bind::<Text, _>(key).execute(conn).await?;
    Ok(())
}

/// Releases a lock taken with [`advisory_lock`].
pub async fn advisory_unlock(conn: &mut AsyncPgConnection, key: &str) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_unlock(hashtext($1))").bind::<Text, _>(key).execute(conn).await?;
    Ok(())
}

/// Ends every other session connected to the current database, returning how many.
/// Used by fault-injection tests to simulate a database that drops its clients.
pub async fn terminate_other_backends(conn: &mut AsyncPgConnection) -> Result<i64> {
    let one: One = diesel::sql_query(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::bigint AS n \
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .get_result(conn)
    .await?;
    Ok(one.n)
}
