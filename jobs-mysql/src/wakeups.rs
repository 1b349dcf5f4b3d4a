//! Rationed wake-ups for enqueues through the driver (the rule: `jobs_driver::wake_ration`).
//! A wake-up for other processes is a `job_notifications` row, so an enqueue that writes
//! one is a transaction of two statements (`BEGIN`, the insert, the row, `COMMIT`: four
//! round trips). Within [`WAKE_WINDOW`](crate::WAKE_WINDOW) of a queue's last wake-up, an enqueue of at most
//! one statement's rows is instead that one statement, committing by itself; one trailing
//! row per queue follows at the window's end. This process's listeners are told at once
//! either way (`local`); other processes read the rows every `notification_poll` (50 ms), so
//! the window adds at most its length to their pickup.

use jobs_driver::wake_ration::due_queues;
use jobs_driver::{NewJob, Notification};

use crate::driver::MysqlDriver;
use crate::jobs::insert::ROWS_PER_STATEMENT;
use crate::notifications;
use crate::pool;

/// Whether enqueueing `jobs` may skip its wake-up rows: one statement's worth, and every
/// queue it makes jobs due in was woken within the window (or none is due).
pub(crate) fn rationed(driver: &MysqlDriver, jobs: &[NewJob]) -> bool {
    if jobs.len() > ROWS_PER_STATEMENT {
        return false;
    }
    let due = due_queues(jobs);
    due.is_empty() || !driver.wakeups.claim_leading(&due)
}

/// After a rationed insert committed: tells this process's listeners at once, and makes
/// sure a trailing row for each queue follows at the end of its window.
pub(crate) fn after_rationed(driver: &MysqlDriver, told: &[Notification]) {
    driver.deliver(told);
    let queues: Vec<String> = told
        .iter()
        .filter_map(|n| match n {
            Notification::JobsAvailable { queue } => Some(queue.clone()),
            _ => None,
        })
        .collect();
    if queues.is_empty() {
        return;
    }
    let pool = driver.pool.clone();
    driver.wakeups.cover(queues, move |queues| async move {
        let sent = async {
            let mut conn = pool::lend(&pool).await?;
            let mut outcome = Ok(());
            for queue in queues {
                outcome = notifications::add(&mut *conn, &Notification::JobsAvailable { queue }).await;
                if outcome.is_err() {
                    break;
                }
            }
            conn.give_back(&outcome);
            outcome
        }
        .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "writing a wake-up failed; other processes find the jobs at their next poll");
        }
    });
}
