//! [`OpConn`]: the connection one driver operation runs on. Through a pooler in transaction
//! mode the operation runs in a transaction of its own, and a connection whose operation was
//! abandoned mid-transaction (its future dropped) is closed rather than pooled.

use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AnsiTransactionManager, AsyncPgConnection, TransactionManager};
use jobs_driver::Result;

use crate::pool::{self, Pool, PooledConnection};

/// Runs `$body` (an operation's future, on `$c: &mut AsyncPgConnection`) on a connection
/// from the driver's pool, inside a transaction of its own through a pooler.
macro_rules! on_conn {
    ($self:ident, $c:ident => $body:expr) => {{
        let mut conn = $crate::op_conn::OpConn::begin(&$self.pool, $self.through_pooler).await?;
        let $c: &mut diesel_async::AsyncPgConnection = conn.conn();
        let result = $body.await;
        conn.finish(result).await
    }};
}
pub(crate) use on_conn;

/// [`on_conn`] in a transaction of its own, pooler or not: for operations whose
/// statements must commit together (workflows' settle and insert, a retry that re-opens
/// its dependents' edges).
macro_rules! on_tx {
    ($self:ident, $c:ident => $body:expr) => {{
        let mut conn = $crate::op_conn::OpConn::begin(&$self.pool, true).await?;
        let $c: &mut diesel_async::AsyncPgConnection = conn.conn();
        let result = $body.await;
        conn.finish(result).await
    }};
}
pub(crate) use on_tx;

/// A connection checked out for one operation.
pub(crate) struct OpConn {
    /// `None` once finished (or given up).
    conn: Option<PooledConnection>,
    transaction: bool,
}

impl OpConn {
    /// A connection from `pool`, in a new transaction if `transaction`.
    pub(crate) async fn begin(pool: &Pool, transaction: bool) -> Result<OpConn> {
        let mut conn = pool::get(pool).await?;
        if transaction {
            AnsiTransactionManager::begin_transaction(&mut *conn).await?;
        }
        Ok(OpConn { conn: Some(conn), transaction })
    }

    /// The connection.
    pub(crate) fn conn(&mut self) -> &mut AsyncPgConnection {
        // Some until `finish` or drop; `finish` consumes self.
        self.conn.as_deref_mut().unwrap_or_else(|| unreachable!("an OpConn is used only before it finishes"))
    }

    /// Commits the operation's transaction if it succeeded, rolls it back if not. A
    /// connection whose rollback failed is marked broken by diesel and leaves the pool.
    pub(crate) async fn finish<T>(mut self, result: Result<T>) -> Result<T> {
        let Some(mut conn) = self.conn.take() else { return result };
        if !self.transaction {
            return result;
        }
        match result {
            Ok(value) => {
                AnsiTransactionManager::commit_transaction(&mut *conn).await?;
                Ok(value)
            }
            Err(e) => {
                if let Err(rollback) = AnsiTransactionManager::rollback_transaction(&mut *conn).await {
                    tracing::debug!(error = %rollback, "rolling back a failed operation failed");
                }
                Err(e)
            }
        }
    }
}

impl Drop for OpConn {
    /// An operation abandoned inside its transaction (its future dropped: a timeout, a
    /// client that went away): the connection is taken out of the pool and closed, which
    /// rolls the transaction back and frees the server connection a pooler lent it, instead
    /// of idling in the pool, in the transaction, until its next checkout.
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.transaction
        {
            drop(Object::take(conn));
        }
    }
}
