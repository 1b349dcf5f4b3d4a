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
use jobs_driver::polled_listener::{NotificationTable, PolledListener};
use jobs_driver::{Notification, Result};

use crate::local::Local;
use crate::notifications;
use crate::pool::{self, AsyncSqliteConnection, Pool};
use crate::time::now_ms;

/// How often a listener deletes notifications every listener has had time to read.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// The reading side of one node's listener: its own connection and where it stopped.
pub(crate) struct SqliteTable {
    conn: AsyncSqliteConnection,
    local: Arc<Local>,
    after: i64,
    trimmed: Instant,
}

/// A listener on its own connection, taken out of `pool`, starting after the newest
/// notification.
pub(crate) async fn listen(
    pool: &Pool,
    local: Arc<Local>,
    every: Duration,
) -> Result<PolledListener<SqliteTable>> {
    let own = local.wake.subscribe();
    let mut conn = Object::take(pool::get(pool).await?);
    let after = conn.spawn_blocking(|c| Ok(notifications::last_id(c))).await??;
    let table = SqliteTable { conn, local, after, trimmed: Instant::now() };
    Ok(PolledListener::new(table, own, every))
}

#[async_trait]
impl NotificationTable for SqliteTable {
    async fn read_new(&mut self, into: &mut VecDeque<Notification>) -> Result<()> {
        let after = self.after;
        let (found, last) =
            self.conn.spawn_blocking(move |c| Ok(notifications::read_after(c, after))).await??;
        self.after = last;
        into.extend(found);
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
