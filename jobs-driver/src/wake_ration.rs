//! Rationing wake-ups after enqueues: at most one per queue per window, and none later
//! than a window after the insert that needed it. Drivers whose wake-up costs a statement
//! (a Postgres `NOTIFY`, a MariaDB `job_notifications` row) use it for inserts through
//! their own pool; the statements themselves stay with each driver.
//!
//! Per queue:
//! - the first insert of a window wakes the workers itself, with its own commit (the
//!   leading edge: [`WakeRation::claim_leading`]);
//! - an insert within the window of the last wake-up does not; after its commit it makes
//!   sure one trailing wake-up is scheduled for the end of the window
//!   ([`WakeRation::schedule_trailing`]), which the driver sends as a statement of its own
//!   and marks sent ([`WakeRation::sending`]) just before.
//!
//! Every insert is thus followed by a wake-up sent after its commit, at most a window
//! later, and a stream of enqueues sends one per window. Wake-ups are hints: if one fails
//! (or the process exits first) the workers find the jobs at their next poll.
//!
//! ```
//! use std::time::Duration;
//! use jobs_driver::wake_ration::WakeRation;
//! use tokio::time::Instant;
//!
//! let ration = WakeRation::new(Duration::from_millis(2));
//! let t0 = Instant::now();
//! assert!(ration.claim_leading_at(&["mail"], t0));
//! assert!(!ration.claim_leading_at(&["mail"], t0 + Duration::from_millis(1)));
//! let (at, queues) = ration.schedule_trailing(vec!["mail".into()], t0 + Duration::from_millis(1)).unwrap();
//! assert_eq!((at, queues), (t0 + Duration::from_millis(2), vec!["mail".to_owned()]));
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;

use crate::job::NewJob;

#[derive(Debug)]
struct QueueWake {
    /// When the last wake-up was sent (or claimed by an insert that sends it).
    last: Instant,
    /// A trailing wake-up is scheduled and has not been sent yet.
    trailing: bool,
}

/// The wake-up state of one pool (or driver): per queue, when its last wake-up went and
/// whether a trailing one is due.
#[derive(Debug)]
pub struct WakeRation {
    window: Mutex<Duration>,
    queues: Mutex<HashMap<String, QueueWake>>,
}

impl WakeRation {
    /// Rationing with `window`: the longest a wake-up is held back after the insert that
    /// needs it, and the shortest time between two wake-ups of one queue.
    pub fn new(window: Duration) -> WakeRation {
        WakeRation { window: Mutex::new(window), queues: Mutex::new(HashMap::new()) }
    }

    /// The window.
    pub fn window(&self) -> Duration {
        *self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the window; zero makes every insert wake the workers itself.
    pub fn set_window(&self, window: Duration) {
        *self.window.lock().unwrap_or_else(|e| e.into_inner()) = window;
    }

    /// Called before an insert whose jobs due now go to `due_queues`: whether the insert
    /// should wake the workers itself, because one of them has had no wake-up within the
    /// window. If so, the wake-up is counted as sent for all of them.
    pub fn claim_leading(&self, due_queues: &[&str]) -> bool {
        self.claim_leading_at(due_queues, Instant::now())
    }

    /// [`claim_leading`](Self::claim_leading) at `now`.
    pub fn claim_leading_at(&self, due_queues: &[&str], now: Instant) -> bool {
        let window = self.window();
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let leading =
            due_queues.iter().any(|q| queues.get(*q).is_none_or(|w| now.duration_since(w.last) >= window));
        if leading {
            for q in due_queues {
                queues
                    .entry((*q).to_owned())
                    .and_modify(|w| w.last = now)
                    .or_insert(QueueWake { last: now, trailing: false });
            }
        }
        leading
    }

    /// Called after an insert that did not wake the workers has committed jobs available
    /// in `queues` (at `now`): marks those without a trailing wake-up as having one, and
    /// returns when to send it and for which queues (`None` when all are covered).
    pub fn schedule_trailing(&self, queues: Vec<String>, now: Instant) -> Option<(Instant, Vec<String>)> {
        let window = self.window();
        let mut state = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = now;
        let mut uncovered = Vec::new();
        for q in queues {
            let wake = state.entry(q.clone()).or_insert(QueueWake { last: now, trailing: false });
            if wake.trailing {
                continue;
            }
            wake.trailing = true;
            at = at.max(wake.last + window);
            uncovered.push(q);
        }
        (!uncovered.is_empty()).then_some((at, uncovered))
    }

    /// Called after an insert that did not wake the workers has committed jobs available
    /// in `queues`: schedules their trailing wake-up ([`schedule_trailing`]) and spawns a
    /// task that waits for its time, marks it sent ([`sending`]) and runs `send` with the
    /// queues it covers. Without a tokio runtime there is nothing to wait on: the workers'
    /// poll finds the jobs.
    ///
    /// [`schedule_trailing`]: Self::schedule_trailing
    /// [`sending`]: Self::sending
    pub fn cover<F, Fut>(self: &Arc<Self>, queues: Vec<String>, send: F)
    where
        F: FnOnce(Vec<String>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some((at, queues)) = self.schedule_trailing(queues, Instant::now()) else { return };
        let this = self.clone();
        let task = async move {
            tokio::time::sleep_until(at).await;
            this.sending(&queues);
            send(queues).await;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(task));
        }
    }

    /// Called just before a trailing wake-up for `queues` goes out: clears their flags,
    /// so that an insert that still sees one set is covered by the statement sent after
    /// it looked.
    pub fn sending(&self, queues: &[String]) {
        let now = Instant::now();
        let mut state = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        for q in queues {
            if let Some(wake) = state.get_mut(q) {
                wake.trailing = false;
                wake.last = now;
            }
        }
    }
}

/// The queues of the jobs due now by this process's clock (a guess: the database decides,
/// and an insert that did not wake the workers wakes the queues it reports afterwards).
pub fn due_queues(jobs: &[NewJob]) -> Vec<&str> {
    let now = Utc::now();
    let mut queues: Vec<&str> = Vec::new();
    for job in jobs {
        let due = job.run_at.is_none_or(|at| at <= now) && job.delay_ms.is_none_or(|ms| ms <= 0);
        if due && !queues.contains(&&*job.queue) {
            queues.push(&job.queue);
        }
    }
    queues
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::WakeRation;

    const WINDOW: Duration = Duration::from_millis(2);

    #[test]
    fn the_first_enqueue_of_a_window_wakes_by_itself_and_the_rest_wait_for_one_trailing_wake_up() {
        let w = WakeRation::new(WINDOW);
        let t0 = Instant::now();
        assert!(w.claim_leading_at(&["mail"], t0), "nothing sent yet: the insert wakes");
        let t1 = t0 + Duration::from_micros(500);
        assert!(!w.claim_leading_at(&["mail"], t1), "within the window");
        let (at, queues) = w.schedule_trailing(vec!["mail".into()], t1).expect("a trailing wake-up");
        assert_eq!((at, queues), (t0 + WINDOW, vec!["mail".to_owned()]));
        // Later inserts of the window are covered by the one already scheduled.
        let t2 = t0 + Duration::from_millis(1);
        assert!(!w.claim_leading_at(&["mail"], t2));
        assert_eq!(w.schedule_trailing(vec!["mail".into()], t2), None);
        // Another queue has its own window.
        assert!(w.claim_leading_at(&["other"], t2));
        // Once the window has passed, an insert wakes by itself again.
        assert!(w.claim_leading_at(&["mail"], t0 + WINDOW));
        // Once sent, the next insert within the window schedules a new trailing wake-up.
        w.sending(&["mail".to_owned()]);
        assert!(w.schedule_trailing(vec!["mail".into()], Instant::now()).is_some());
    }

    #[test]
    fn an_insert_after_a_window_without_wake_ups_gets_its_trailing_wake_up_at_once() {
        let w = WakeRation::new(WINDOW);
        let t0 = Instant::now();
        assert!(w.claim_leading_at(&["mail"], t0));
        // The insert that claimed the edge found nothing due (say), and one that did not
        // wake commits long after the window: its wake-up is due now, not in the past.
        let late = t0 + Duration::from_millis(50);
        let (at, _) = w.schedule_trailing(vec!["mail".into()], late).expect("scheduled");
        assert_eq!(at, late);
    }

    #[test]
    fn a_zero_window_wakes_from_every_insert() {
        let w = WakeRation::new(Duration::from_millis(2));
        w.set_window(Duration::ZERO);
        let t0 = Instant::now();
        assert!(w.claim_leading_at(&["mail"], t0));
        assert!(w.claim_leading_at(&["mail"], t0));
    }
}
