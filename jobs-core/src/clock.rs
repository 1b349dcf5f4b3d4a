//! Time, injectable so tests can drive it.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// Where the time comes from.
///
/// In production the database's `now()` is the single source of truth: queries are passed
/// `None` and use it, so nodes with skewed clocks still agree. Tests install a
/// [`ManualClock`] and every query receives its time instead.
pub trait Clock: Send + Sync + Debug + 'static {
    /// The current time for computations made in Rust (cron slots, logs).
    fn now(&self) -> DateTime<Utc>;

    /// The time to pass to queries: `None` lets the database use its own `now()`.
    fn db_now(&self) -> Option<DateTime<Utc>>;
}

/// The real clock: the database decides in queries, the system clock in Rust.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn db_now(&self) -> Option<DateTime<Utc>> {
        None
    }
}

/// A clock that only moves when told to. Shared by cloning.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock(Arc::new(Mutex::new(start)))
    }

    /// Sets the time.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = to;
    }

    /// Moves the time forward.
    pub fn advance(&self, by: std::time::Duration) {
        let mut now = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        *now = now.checked_add_signed(by).unwrap_or(DateTime::<Utc>::MAX_UTC);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn db_now(&self) -> Option<DateTime<Utc>> {
        Some(self.now())
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;
