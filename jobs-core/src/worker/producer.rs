//! One producer per queue: claims as many jobs as the queue has free slots, in one
//! statement, and hands each to an executor task.
//!
//! While claims come back full it fetches again at once; when one comes back short the
//! queue looked empty, and it waits for a NOTIFY from an insert (or the scheduler), a
//! poll tick, or shutdown. It never fetches for a paused queue.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::executor;
use super::runtime::{QueueRuntime, Shared};
use crate::db;

/// Runs until `stop` fires.
pub(crate) async fn run(shared: Arc<Shared>, queue: Arc<QueueRuntime>, stop: CancellationToken) {
    let mut error_pause = Duration::from_millis(100);
    let mut ticker = tokio::time::interval(shared.config.poll_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.reset();
    loop {
        if stop.is_cancelled() {
            return;
        }
        if queue.paused.load(Ordering::Acquire) {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = queue.wake.notified() => {}
                _ = ticker.tick() => refresh_paused(&shared, &queue).await,
            }
            continue;
        }
        let free = queue.slots.available_permits();
        if free == 0 {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = queue.slot_freed.notified() => {}
            }
            continue;
        }
        // A busy queue frees slots one by one; rather than claim a job or two per
        // statement, give the others a moment (at most `fetch_cooldown`) to free up too.
        let all = queue.config.concurrency;
        if free < all {
            let deadline = tokio::time::Instant::now() + shared.config.fetch_cooldown;
            while queue.slots.available_permits() < all {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = queue.slot_freed.notified() => {}
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
        }
        let free = queue.slots.available_permits();
        let want = free.min(shared.config.max_fetch);
        queue.fetches.fetch_add(1, Ordering::Relaxed);
        let fetched = async {
            let mut conn = shared.pool.get().await?;
            db::execution::fetch_available(
                &mut conn,
                &queue.name,
                i64::try_from(want).unwrap_or(i64::MAX),
                &shared.node,
                shared.clock.db_now(),
            )
            .await
        }
        .await;
        match fetched {
            Ok(jobs) => {
                error_pause = Duration::from_millis(100);
                let full = jobs.len() == want;
                if !jobs.is_empty() {
                    metrics::counter!("jobs_claimed_total", "queue" => queue.label)
                        .increment(jobs.len() as u64);
                    metrics::counter!("jobs_fetches_total", "queue" => queue.label).increment(1);
                }
                for job in jobs {
                    // Only this producer takes slots and it asked for no more than were
                    // free, so this does not wait; it fails only if the semaphore closed.
                    match queue.slots.clone().acquire_owned().await {
                        Ok(permit) => executor::spawn(shared.clone(), queue.clone(), job, permit),
                        Err(_) => {
                            tracing::error!(job.id = job.id, "slots closed; the rescuer will retry the job")
                        }
                    }
                }
                if full {
                    continue;
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = queue.wake.notified() => {}
                    _ = ticker.tick() => refresh_paused(&shared, &queue).await,
                }
            }
            Err(e) => {
                tracing::warn!(queue = %queue.name, error = %e, "fetching jobs failed; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(error_pause) => {}
                }
                error_pause =
                    (error_pause * 2).min(shared.config.poll_interval.max(Duration::from_millis(100)));
            }
        }
    }
}

/// Re-reads the queue's pause flag (a missed NOTIFY must not pause or resume it forever).
async fn refresh_paused(shared: &Shared, queue: &QueueRuntime) {
    let paused = async {
        let mut conn = shared.pool.get().await?;
        db::queues::is_paused(&mut conn, &queue.name).await
    }
    .await;
    match paused {
        Ok(paused) => queue.paused.store(paused, Ordering::Release),
        Err(e) => tracing::warn!(queue = %queue.name, error = %e, "reading the pause flag failed"),
    }
}
