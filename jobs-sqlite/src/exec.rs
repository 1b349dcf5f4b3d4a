//! How the driver runs its statements: each operation is one closure over a synchronous
//! `SqliteConnection`, run on a pooled connection's blocking thread, so that an operation
//! of many statements (a batch of completions, a cron pass) costs one hop to that thread.
//! Writes run in an immediate transaction, after waiting their turn in the process's
//! write queue ([`Local::write_gate`](crate::local::Local)).

use std::sync::Arc;

use diesel::SqliteConnection;
use jobs_driver::{DriverError, Result};

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

/// Runs `op` on a connection of `pool` in one `BEGIN IMMEDIATE` transaction, once this
/// process's earlier writes to the file are done. Commits when `op` returns `Ok`.
pub(crate) async fn write<R, F>(pool: &Pool, local: &Local, op: F) -> Result<R>
where
    F: FnOnce(&mut SqliteConnection) -> Result<R> + Send + 'static,
    R: Send + 'static,
{
    let turn = Arc::clone(&local.write_gate).lock_owned().await;
    let mut conn = pool::get(pool).await?;
    conn.spawn_blocking(move |c| {
        let outcome = c.immediate_transaction::<R, DriverError, _>(op);
        drop(turn);
        Ok(outcome)
    })
    .await?
}
