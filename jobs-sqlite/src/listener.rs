//! The listener: notifications from this process at once, and from other processes by
//! reading `job_notifications` every [`SqliteDriver::notification_poll`] (see
//! `notifications`).
//!
//! [`SqliteDriver::notification_poll`]: crate::SqliteDriver::notification_poll

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel_async::pooled_connection::deadpool::Object;
use jobs_driver::{DriverError, Listener, Notification, Result};
use tokio::sync::broadcast;

use crate::local::Local;
use crate::notifications;
use crate::pool::{self, AsyncSqliteConnection, Pool};
use crate::time::now_ms;

/// How often a listener deletes notifications every listener has had time to read.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Notifications for one node.
pub(crate) struct SqliteListener {
    conn: AsyncSqliteConnection,
    local: Arc<Local>,
    own: broadcast::Receiver<Notification>,
    after: i64,
    read: VecDeque<Notification>,
    tick: tokio::time::Interval,
    trimmed: Instant,
}

/// A listener on its own connection, taken out of `pool`, starting after the newest
/// notification.
pub(crate) async fn listen(pool: &Pool, local: Arc<Local>, every: Duration) -> Result<SqliteListener> {
    let own = local.wake.subscribe();
    let mut conn = Object::take(pool::get(pool).await?);
    let after = conn.spawn_blocking(|c| Ok(notifications::last_id(c))).await??;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    Ok(SqliteListener { conn, local, own, after, read: VecDeque::new(), tick, trimmed: Instant::now() })
}

impl SqliteListener {
    /// Reads the notifications committed since the last read.
    async fn read_table(&mut self) -> Result<()> {
        let after = self.after;
        let (found, last) =
            self.conn.spawn_blocking(move |c| Ok(notifications::read_after(c, after))).await??;
        self.after = last;
        self.read.extend(found);
        if self.trimmed.elapsed() >= TRIM_EVERY {
            self.trimmed = Instant::now();
            let now = now_ms(None);
            let trimmed = crate::exec::write(&self.local, move |c| notifications::trim(c, now)).await;
            if let Err(e) = trimmed {
                tracing::debug!(error = %e, "trimming old notifications failed; the next listener pass retries");
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Listener for SqliteListener {
    async fn next(&mut self) -> Result<Notification> {
        loop {
            if let Some(notification) = self.read.pop_front() {
                return Ok(notification);
            }
            tokio::select! {
                own = self.own.recv() => match own {
                    Ok(notification) => return Ok(notification),
                    // Missed some of this process's own: the table has them too.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(DriverError::Pool("the driver's notification channel closed".into()));
                    }
                },
                _ = self.tick.tick() => self.read_table().await?,
            }
        }
    }
}
