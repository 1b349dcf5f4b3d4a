//! The listener of a driver without LISTEN/NOTIFY: notifications of this process's own
//! commits arrive at once on a broadcast channel, and other processes' are read from the
//! driver's notification table every tick. The driver says how to read its table
//! ([`NotificationTable`]); [`PolledListener`] merges the two sources.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::broadcast;

use crate::{DriverError, Listener, Notification, Result};

/// A driver's notification table, read from where the last read stopped.
#[async_trait]
pub trait NotificationTable: Send {
    /// Appends the notifications committed since the last read to `into`.
    async fn read_new(&mut self, into: &mut VecDeque<Notification>) -> Result<()>;
}

/// A [`Listener`] over this process's own notifications (`own`) and a table read every
/// `every`.
pub struct PolledListener<T> {
    table: T,
    own: broadcast::Receiver<Notification>,
    read: VecDeque<Notification>,
    tick: tokio::time::Interval,
}

impl<T: NotificationTable> PolledListener<T> {
    /// Listens to `own` at once and to `table` every `every` (a late tick is not caught up).
    pub fn new(table: T, own: broadcast::Receiver<Notification>, every: Duration) -> Self {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        PolledListener { table, own, read: VecDeque::new(), tick }
    }
}

#[async_trait]
impl<T: NotificationTable> Listener for PolledListener<T> {
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
                _ = self.tick.tick() => self.table.read_new(&mut self.read).await?,
            }
        }
    }
}
