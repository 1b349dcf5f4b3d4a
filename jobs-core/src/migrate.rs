//! Running the schema migrations from Rust: [`migrate`] on a connection of any supported
//! backend (each driver owns its migrations), or `Driver::migrate` through a driver.

use diesel_async::AsyncConnection;
use jobs_driver::ConnectionDriver;

use crate::backend::JobsBackend;
use crate::error::Result;

/// Applies every pending migration of `conn`'s backend and returns the versions it
/// applied (none when the schema is current, so calling it on every start is cheap and
/// safe).
///
/// Takes the connection by value: pass an `AsyncPgConnection` or `pool.get().await?`.
/// Several processes may call this at once: on Postgres an advisory lock lets one migrate
/// while the others wait, then find nothing left to do. Needs tokio's multi-thread runtime
/// (diesel's migration harness blocks); on a current-thread runtime it returns
/// [`Error::Runtime`](crate::Error::Runtime) instead of panicking.
pub async fn migrate<C>(conn: C) -> Result<Vec<String>>
where
    C: AsyncConnection + 'static,
    C::Backend: JobsBackend,
{
    Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::migrate(conn).await?)
}
