//! Serialising concurrent migration runs.

use diesel::pg::Pg;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, RunQueryDsl};

use jobs_driver::Result;

/// Advisory-lock key shared by every process that migrates the jobs schema.
const MIGRATION_LOCK: i64 = 0x006a_6f62_736d_6967; // "jobsmig"

/// Takes the session-level migration lock, waiting for another migrator to finish.
pub(crate) async fn lock<C: AsyncConnection<Backend = Pg>>(conn: &mut C) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_lock($1)").bind::<BigInt, _>(MIGRATION_LOCK).execute(conn).await?;
    Ok(())
}

/// Releases the migration lock.
pub(crate) async fn unlock<C: AsyncConnection<Backend = Pg>>(conn: &mut C) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_unlock($1)")
        .bind::<BigInt, _>(MIGRATION_LOCK)
        .execute(conn)
        .await?;
    Ok(())
}

/// Takes the migration lock until the current transaction ends (for a connection through a
/// pooler, where a session lock would outlive the transaction on a server connection the
/// pooler lends to others).
pub(crate) async fn lock_for_transaction<C: AsyncConnection<Backend = Pg>>(conn: &mut C) -> Result<()> {
    diesel::sql_query("SELECT pg_advisory_xact_lock($1)")
        .bind::<BigInt, _>(MIGRATION_LOCK)
        .execute(conn)
        .await?;
    Ok(())
}
