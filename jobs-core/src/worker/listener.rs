//! The worker's listener: wakes producers when jobs become available, and carries
//! cancellations and pauses from any node, from the driver's [`Listener`].
//!
//! When the listener's connection fails, it reconnects with back-off and wakes every
//! producer, since notifications may have been missed; polling covers the gap. A driver
//! without notifications offers no listener: the worker then relies on polling, and the
//! heartbeat asks for cancellations.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jobs_driver::{Listener, Notification};
use tokio_util::sync::CancellationToken;

use super::running_jobs::StopReason;
use super::shared::Shared;
use crate::retry_pause::RetryPause;

/// Runs until `stop` fires, or at once if the driver has no notifications.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    let mut pause = RetryPause::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        let mut listener: Box<dyn Listener> = match shared.driver.listen().await {
            Ok(Some(listener)) => listener,
            Ok(None) => {
                tracing::info!(driver = shared.driver.name(), "the driver has no notifications; polling");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the notification connection failed; polling until it is back");
                if !pause.sleep_unless(&stop).await {
                    return;
                }
                continue;
            }
        };
        pause.succeeded();
        shared.listening.store(true, Ordering::Release);
        // Anything may have been missed while we were not listening.
        for queue in shared.queues.values() {
            queue.wake.notify_one();
        }
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                next = listener.next() => match next {
                    Ok(notification) => dispatch(&shared, notification),
                    Err(e) => {
                        tracing::warn!(error = %e, "the notification connection was lost; reconnecting");
                        break;
                    }
                },
            }
        }
        shared.listening.store(false, Ordering::Release);
    }
}

fn dispatch(shared: &Shared, notification: Notification) {
    match notification {
        Notification::JobsAvailable { queue } => {
            if let Some(queue) = shared.queues.get(&queue) {
                // `notify_one` stores one wake-up: a burst of inserts wakes the producer once.
                queue.wake.notify_one();
            }
        }
        Notification::CancelJob { id } => cancel_running(shared, id),
        Notification::QueuePaused { queue, paused } => {
            if let Some(queue) = shared.queues.get(&queue) {
                queue.paused.store(paused, Ordering::Release);
                queue.wake.notify_one();
            }
        }
        other => tracing::debug!(?other, "ignoring a notification this worker does not use"),
    }
}

/// Stops job `id` if this node runs it (every run of it), on someone's request.
pub(crate) fn cancel_running(shared: &Shared, id: i64) {
    let runs = shared.running.lock().unwrap_or_else(|e| e.into_inner()).of_job(id);
    for job in runs {
        tracing::info!(job.id = id, "cancelling running job on request");
        job.stop(StopReason::Cancelled);
    }
}
