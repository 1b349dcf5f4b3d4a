//! A queue's concurrency on this node, changeable while it runs: the worker's configured
//! concurrency, or the one set for the queue across the cluster (`queue_set_concurrency`,
//! from the dashboard), which every node reads at its next poll.
//!
//! Growing adds permits to the queue's semaphore at once. Shrinking forgets the free
//! permits at once and owes the rest: permits that come back from running jobs are
//! forgotten instead of freed until the debt is paid, so no new job starts beyond the new
//! limit and no running job is interrupted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Semaphore;

/// See the module's note.
#[derive(Debug)]
pub(crate) struct Limit {
    /// The worker's own setting, used when the cluster sets none.
    configured: usize,
    /// The limit in force.
    current: AtomicUsize,
    /// Permits still to forget as they come back (after a shrink).
    owed: AtomicUsize,
    /// Serialises changes.
    change: Mutex<()>,
}

impl Limit {
    pub(crate) fn new(configured: usize) -> Limit {
        Limit {
            configured,
            current: AtomicUsize::new(configured),
            owed: AtomicUsize::new(0),
            change: Mutex::new(()),
        }
    }

    /// The limit in force.
    pub(crate) fn current(&self) -> usize {
        self.current.load(Ordering::Acquire)
    }

    /// Slots in use: permits out of the semaphore (including those a shrink still owes).
    pub(crate) fn in_use(&self, slots: &Semaphore) -> usize {
        (self.current() + self.owed.load(Ordering::Acquire)).saturating_sub(slots.available_permits())
    }

    /// Whether a permit coming back is owed (then the caller forgets it) rather than freed.
    pub(crate) fn take_owed(&self) -> bool {
        self.owed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |owed| owed.checked_sub(1)).is_ok()
    }

    /// Whether a shrink still waits for permits to come back.
    pub(crate) fn owes(&self) -> bool {
        self.owed.load(Ordering::Acquire) > 0
    }

    /// Forgets free permits that are owed (permits returned without passing through
    /// [`take_owed`](Self::take_owed), such as a claim's unused reservation).
    pub(crate) fn settle(&self, slots: &Semaphore) {
        if !self.owes() {
            return;
        }
        let _change = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let forgotten = slots.forget_permits(self.owed.load(Ordering::Acquire));
        // A permit paid through `take_owed` meanwhile must not be paid twice: take off at
        // most what is still owed, and give back what was forgotten beyond it.
        let excess = self.pay(forgotten);
        if excess > 0 {
            slots.add_permits(excess);
        }
    }

    /// Takes up to `n` off the debt, atomically with `take_owed`. Returns how much of `n`
    /// was not owed.
    fn pay(&self, n: usize) -> usize {
        let mut excess = 0;
        let _ = self.owed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |owed| {
            excess = n.saturating_sub(owed);
            Some(owed.saturating_sub(n))
        });
        excess
    }

    /// Sets the limit to `cluster` (or back to the configured one when `None`). Returns
    /// whether it changed.
    pub(crate) fn set(&self, cluster: Option<usize>, slots: &Semaphore) -> bool {
        let target = cluster.unwrap_or(self.configured).max(1);
        let _change = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current();
        if target == current {
            return false;
        }
        if target > current {
            // First cancel what a shrink still owes, then add the rest.
            let grow = target - current;
            slots.add_permits(self.pay(grow));
        } else {
            let shrink = current - target;
            let forgotten = slots.forget_permits(shrink);
            self.owed.fetch_add(shrink - forgotten, Ordering::AcqRel);
        }
        self.current.store(target, Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_coming_back_while_the_debt_is_settled_are_never_paid_twice() {
        // Many threads return owed permits while another settles and the limit moves: in
        // the end the permits out plus the free ones always equal the limit in force.
        for _ in 0..200 {
            let slots = std::sync::Arc::new(Semaphore::new(8));
            let limit = std::sync::Arc::new(Limit::new(8));
            let held: Vec<_> = (0..8).map(|_| slots.clone().try_acquire_owned().expect("a slot")).collect();
            assert!(limit.set(Some(2), &slots));
            let returning: Vec<_> = held
                .into_iter()
                .map(|permit| {
                    let limit = limit.clone();
                    std::thread::spawn(move || if limit.take_owed() { permit.forget() } else { drop(permit) })
                })
                .collect();
            let settler = {
                let (limit, slots) = (limit.clone(), slots.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        limit.settle(&slots);
                    }
                })
            };
            for t in returning {
                t.join().expect("returned");
            }
            settler.join().expect("settled");
            limit.settle(&slots);
            assert!(!limit.owes());
            assert_eq!(slots.available_permits(), 2, "exactly the new limit is free once all came back");
            assert_eq!(limit.in_use(&slots), 0);
        }
    }

    #[test]
    fn shrinking_waits_for_running_permits_and_growing_cancels_the_debt() {
        let slots = std::sync::Arc::new(Semaphore::new(4));
        let limit = Limit::new(4);
        // Three run; one is free.
        let running: Vec<_> = (0..3).map(|_| slots.clone().try_acquire_owned().expect("a slot")).collect();
        assert!(limit.set(Some(2), &slots));
        assert_eq!(slots.available_permits(), 0, "the free one is forgotten at once");
        assert_eq!(limit.in_use(&slots), 3, "the running ones still count");
        // The first to come back is owed; the next is free again.
        let mut running = running.into_iter();
        let first = running.next().expect("a permit");
        assert!(limit.take_owed());
        first.forget();
        assert!(!limit.take_owed());
        drop(running.next());
        assert_eq!(slots.available_permits(), 1);
        assert_eq!(limit.in_use(&slots), 1);
        // Back to the configured 4: three free, one running.
        assert!(limit.set(None, &slots));
        assert_eq!((limit.current(), slots.available_permits()), (4, 3));
        // Three running, one free: shrink to 1, then grow to 3 before any returns. The
        // debt (two) is cancelled rather than permits added.
        let more: Vec<_> = (0..2).map(|_| slots.clone().try_acquire_owned().expect("a slot")).collect();
        assert!(limit.set(Some(1), &slots));
        assert_eq!(slots.available_permits(), 0);
        assert!(limit.owes());
        assert!(limit.set(Some(3), &slots));
        assert!(!limit.owes());
        assert_eq!((slots.available_permits(), limit.in_use(&slots)), (0, 3));
        drop(more);
        assert_eq!(slots.available_permits(), 2);
        assert!(!limit.set(Some(3), &slots), "no change");
    }
}
