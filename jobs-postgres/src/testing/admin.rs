//! Database-level administration for test support: creating, copying, renaming and
//! dropping whole databases, and the advisory lock held while the template is built.

use diesel::OptionalExtension;
use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_driver::Result;

use crate::rows::Count;

/// Quotes an identifier for the few statements (CREATE/DROP DATABASE) that cannot take it
/// as a bound parameter.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Whether a database of this name exists on the server.
pub(crate) async fn database_exists(conn: &mut AsyncPgConnection, name: &str) -> Result<bool> {
    let found: Option<Count> = diesel::sql_query("SELECT 1::bigint AS n FROM pg_database WHERE datname = $1")
        .bind::<Text, _>(name)
        .get_result(conn)
        .await
        .optional()?;
    Ok(found.is_some_and(|one| one.n == 1))
}

/// `CREATE DATABASE name [TEMPLATE template]`.
pub(crate) async fn create_database(
    conn: &mut AsyncPgConnection,
    name: &str,
    template: Option<&str>,
) -> Result<()> {
    let sql = match template {
        Some(template) => format!("CREATE DATABASE {} TEMPLATE {}", quote_ident(name), quote_ident(template)),
        None => format!("CREATE DATABASE {}", quote_ident(name)),
    };
    diesel::sql_query(sql).execute(conn).await?;
    Ok(())
}

/// `DROP DATABASE IF EXISTS name WITH (FORCE)`: also ends the sessions still connected.
pub(crate) async fn drop_database(conn: &mut AsyncPgConnection, name: &str) -> Result<()> {
    diesel::sql_query(format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_ident(name)))
        .execute(conn)
        .await?;
    Ok(())
}

/// `ALTER DATABASE from RENAME TO to`.
pub(crate) async fn rename_database(conn: &mut AsyncPgConnection, from: &str, to: &str) -> Result<()> {
    diesel::sql_query(format!("ALTER DATABASE {} RENAME TO {}", quote_ident(from), quote_ident(to)))
        .execute(conn)
        .await?;
    Ok(())
}

/// Waits for, then takes, a session-level advisory lock keyed by `key`'s hash.
pub(crate) async fn advisory_lock(conn: &mut AsyncPgConnection, key: &str) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_lock(hashtext($1))").bind::<Text, _>(key).execute(conn).await?;
    Ok(())
}

/// Releases a lock taken with [`advisory_lock`].
pub(crate) async fn advisory_unlock(conn: &mut AsyncPgConnection, key: &str) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_unlock(hashtext($1))").bind::<Text, _>(key).execute(conn).await?;
    Ok(())
}
