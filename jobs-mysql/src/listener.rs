//! The listener: notifications from this process at once (`hub`), and from other
//! processes by reading `job_notifications` every [`MysqlDriver::notification_poll`] (see
//! `notifications` for why it re-reads the ids it has not seen yet).
//!
//! [`MysqlDriver::notification_poll`]: crate::MysqlDriver::notification_poll

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel_async::pooled_connection::deadpool::Object;
use jobs_driver::{DriverError, Listener, Notification, Result};
use tokio::sync::broadcast;

use crate::hub::Hub;
use crate::notifications;
use crate::pool::{self, Pool, PooledConnection};

/// How often a listener deletes notifications every listener has had time to read.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// How long an id below the last one read is looked for: a transaction that commits
/// later than this after its insert reaches other processes only through their polls.
const MISSING_FOR: Duration = Duration::from_secs(10);

/// The most missing ids a listener looks for (a burst of rolled-back inserts leaves many).
const MAX_MISSING: usize = 1000;

/// Notifications for one node.
pub(crate) struct MysqlListener {
    conn: diesel_async::AsyncMysqlConnection,
    pool: Pool,
    own: broadcast::Receiver<Notification>,
    after: i64,
    missing: VecDeque<(i64, Instant)>,
    read: VecDeque<Notification>,
    tick: tokio::time::Interval,
    trimmed: Instant,
    /// A read is under way: when `next` finds it still set, the call that started it was
    /// dropped mid-statement, and the connection cannot be trusted.
    reading: bool,
}

/// A listener on its own connection, taken out of `pool`, starting after the newest
/// notification.
pub(crate) async fn listen(pool: &Pool, hub: &Arc<Hub>, every: Duration) -> Result<MysqlListener> {
    let own = hub.subscribe();
    let conn: PooledConnection = pool::get(pool).await?;
    let mut conn = Object::take(conn);
    let after = notifications::last_id(&mut conn).await?;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    Ok(MysqlListener {
        conn,
        pool: pool.clone(),
        own,
        after,
        missing: VecDeque::new(),
        read: VecDeque::new(),
        tick,
        trimmed: Instant::now(),
        reading: false,
    })
}

impl MysqlListener {
    /// Reads the notifications committed since the last read.
    async fn read_table(&mut self) -> Result<()> {
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
                Some(n) => self.read.push_back(n),
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

#[async_trait]
impl Listener for MysqlListener {
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
