//! How the driver runs its statements: each operation is one closure over a synchronous
//! `SqliteConnection`, so that an operation of many statements (a batch of completions, a
//! cron pass) costs one hop to a connection's thread. Reads run on a pooled connection's
//! blocking thread; writes on this process's writer, in a group transaction (`writer`).

use diesel::SqliteConnection;
use jobs_driver::Result;

use crate::local::Local;
use crate::pool::{self, Pool};

/// Runs `op` on a connection of `pool`, outside any transaction (reads: WAL readers never
/// wait for the writer).
pub(crate) async fn read<R, F>(pool: &Pool, op: F) -> Result<R>
where
    F: FnOnce(&mut SqliteConnection) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    let mut conn = pool::get(pool).await?;
    conn.spawn_blocking(move |c| Ok(op(c))).await?
}

/// Runs `op` on this process's writer for the file, in a savepoint of its next group
/// transaction (`BEGIN IMMEDIATE`). Returns once that transaction commits; `op`'s writes
/// are rolled back when it returns an error.
pub(crate) async fn write<R, F>(local: &Local, op: F) -> Result<R>
where
    F: FnOnce(&mut SqliteConnection) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    local.writer().await?.write(op).await
}

/// Runs `$body` (async, on `$conn`, returning the result and the notifications it added)
/// in an immediate transaction on a pooled connection, in this process's turn to write;
/// delivers the notifications once it commits.
macro_rules! in_transaction {
    ($driver:expr, |$conn:ident| $body:expr) => {{
        let (_turn, mut conn) = $driver.write_turn().await?;
        let ended = conn.immediate_transaction::<_, DriverError, _>(async |$conn| $body).await;
        conn.finish();
        let (result, told) = ended?;
        $driver.deliver(told);
        Ok::<_, DriverError>(result)
    }};
}
pub(crate) use in_transaction;
