//! The listener: notifications from this process at once (`local`), and from other
//! processes by reading `job_notifications` every [`MysqlDriver::notification_poll`] (see
//! `notifications` for why it re-reads the ids it has not seen yet).
//!
//! [`MysqlDriver::notification_poll`]: crate::MysqlDriver::notification_poll

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel_async::pooled_connection::deadpool::Object;
use jobs_driver::polled_listener::{NotificationTable, PolledListener};
use jobs_driver::{Notification, Result};

use crate::local::Hub;
use crate::notifications;
use crate::pool::{self, Pool, PooledConnection};

/// How often a listener deletes notifications every listener has had time to read.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// How long an id below the last one read is looked for: a transaction that commits
/// later than this after its insert reaches other processes only through their polls.
const MISSING_FOR: Duration = Duration::from_secs(10);

/// The most missing ids a listener looks for (a burst of rolled-back inserts leaves many).
const MAX_MISSING: usize = 1000;

/// The reading side of one node's listener: its own connection and where it stopped.
pub(crate) struct MysqlTable {
    conn: diesel_async::AsyncMysqlConnection,
    pool: Pool,
    after: i64,
    missing: VecDeque<(i64, Instant)>,
    trimmed: Instant,
    /// A read is under way: when a read finds it still set, the call that started the last
    /// one was dropped mid-statement, and the connection cannot be trusted.
    reading: bool,
}

/// A listener on its own connection, taken out of `pool`, starting after the newest
/// notification.
pub(crate) async fn listen(
    pool: &Pool,
    hub: &Arc<Hub>,
    every: Duration,
) -> Result<PolledListener<MysqlTable>> {
    let own = hub.subscribe();
    let conn: PooledConnection = pool::get(pool).await?;
    let mut conn = Object::take(conn);
    let after = notifications::last_id(&mut conn).await?;
    let table = MysqlTable {
        conn,
        pool: pool.clone(),
        after,
        missing: VecDeque::new(),
        trimmed: Instant::now(),
        reading: false,
    };
    Ok(PolledListener::new(table, own, every))
}

#[async_trait]
impl NotificationTable for MysqlTable {
    async fn read_new(&mut self, into: &mut VecDeque<Notification>) -> Result<()> {
        let now = Instant::now();
        while self.missing.front().is_some_and(|(_, since)| now.duration_since(*since) > MISSING_FOR) {
            self.missing.pop_front();
        }
        let missing: Vec<i64> = self.missing.iter().map(|(id, _)| *id).collect();
        if self.reading {
            self.conn = Object::take(pool::get(&self.pool).await?);
        }
        self.reading = true;
        let rows = notifications::read(&mut self.conn, self.after, &missing).await?;
        self.reading = false;
        for row in rows {
            if row.id > self.after {
                for gap in (self.after + 1).max(row.id - MAX_MISSING as i64)..row.id {
                    if self.missing.len() >= MAX_MISSING {
                        self.missing.pop_front();
                    }
                    self.missing.push_back((gap, now));
                }
                self.after = row.id;
            } else {
                self.missing.retain(|(id, _)| *id != row.id);
            }
            match Notification::decode(&row.channel, &row.payload) {
                Some(n) => into.push_back(n),
                None => tracing::warn!(
                    channel = row.channel,
                    payload = row.payload,
                    "ignoring an unknown notification"
                ),
            }
        }
        if self.trimmed.elapsed() >= TRIM_EVERY {
            self.trimmed = Instant::now();
            let trimmed = match pool::lend(&self.pool).await {
                Ok(mut conn) => {
                    let outcome = notifications::trim(&mut *conn).await.map(|_| ());
                    conn.give_back(&outcome);
                    outcome
                }
                Err(e) => Err(e),
            };
            if let Err(e) = trimmed {
                tracing::debug!(error = %e, "trimming old notifications failed; the next listener pass retries");
            }
        }
        Ok(())
    }
}
