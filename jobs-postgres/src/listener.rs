//! LISTEN: one connection of its own, taken out of the pool (or a direct one, when the pool
//! goes through a pooler), subscribed to both channels.
//!
//! A task owns the connection and its notification stream and forwards what arrives; the
//! [`Listener`] the engine holds reads them. When the connection fails the listener
//! returns the error and the task ends; the engine asks for a new one.

use async_trait::async_trait;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use futures::StreamExt;
use jobs_driver::{DriverError, Listener, Notification, Result};
use tokio::sync::mpsc;

use crate::notifications::{self, AVAILABLE_CHANNEL, CONTROL_CHANNEL};
use crate::pool::{self, Pool};

/// Notifications from one LISTEN connection.
pub(crate) struct PgListener {
    rx: mpsc::Receiver<Result<Notification>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PgListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Takes a connection out of `pool`, subscribes, and starts forwarding.
pub(crate) async fn listen(pool: &Pool) -> Result<PgListener> {
    let object = pool::get(pool).await?;
    listen_on(diesel_async::pooled_connection::deadpool::Object::take(object)).await
}

/// Subscribes `conn` (a direct connection: LISTEN does not pass a pooler in transaction
/// mode) and starts forwarding.
pub(crate) async fn listen_on(mut conn: AsyncPgConnection) -> Result<PgListener> {
    diesel::sql_query(format!("LISTEN {AVAILABLE_CHANNEL}")).execute(&mut conn).await?;
    diesel::sql_query(format!("LISTEN {CONTROL_CHANNEL}")).execute(&mut conn).await?;
    let (tx, rx) = mpsc::channel(1024);
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(conn.notifications_stream());
        loop {
            let forwarded = match stream.next().await {
                Some(Ok(n)) => match notifications::parse(&n.channel, &n.payload) {
                    Some(notification) => tx.send(Ok(notification)).await,
                    None => continue,
                },
                Some(Err(e)) => {
                    let _ = tx.send(Err(DriverError::from(e))).await;
                    return;
                }
                None => {
                    let _ = tx.send(Err(DriverError::Pool("the LISTEN connection closed".into()))).await;
                    return;
                }
            };
            if forwarded.is_err() {
                return;
            }
        }
    });
    Ok(PgListener { rx, task })
}

#[async_trait]
impl Listener for PgListener {
    async fn next(&mut self) -> Result<Notification> {
        match self.rx.recv().await {
            Some(result) => result,
            None => Err(DriverError::Pool("the LISTEN connection closed".into())),
        }
    }
}
