//! The worker's LISTEN connection: wakes producers when jobs become available, and carries
//! cancellations and pauses from any node.
//!
//! It holds one connection of its own (taken out of the pool). When that connection
//! fails, it reconnects with backoff and wakes every producer, since notifications may have
//! been missed; polling covers the gap.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use diesel_async::RunQueryDsl;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::executor::StopReason;
use super::runtime::Shared;
use crate::db::control::{AVAILABLE_CHANNEL, CONTROL_CHANNEL};

/// Runs until `stop` fires.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    let mut pause = Duration::from_millis(100);
    loop {
        let connected = async {
            let object = shared.pool.get().await?;
            let mut conn = diesel_async::pooled_connection::deadpool::Object::take(object);
            diesel::sql_query(format!("LISTEN {AVAILABLE_CHANNEL}")).execute(&mut conn).await?;
            diesel::sql_query(format!("LISTEN {CONTROL_CHANNEL}")).execute(&mut conn).await?;
            Ok::<_, crate::Error>(conn)
        }
        .await;
        let mut conn = match connected {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN connection failed; polling until it is back");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        pause = Duration::from_millis(100);
        shared.listening.store(true, Ordering::Release);
        // Anything may have been missed while we were not listening.
        for queue in shared.queues.values() {
            queue.wake.notify_one();
        }
        let mut notifications = std::pin::pin!(conn.notifications_stream());
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                next = notifications.next() => match next {
                    Some(Ok(n)) => dispatch(&shared, &n.channel, &n.payload),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                        break;
                    }
                    None => break,
                },
            }
        }
        shared.listening.store(false, Ordering::Release);
    }
}

fn dispatch(shared: &Shared, channel: &str, payload: &str) {
    if channel == AVAILABLE_CHANNEL {
        if let Some(queue) = shared.queues.get(payload) {
            // `notify_one` stores one wake-up: a burst of inserts wakes the producer once.
            queue.wake.notify_one();
        }
        return;
    }
    if channel != CONTROL_CHANNEL {
        return;
    }
    let Ok(message) = serde_json::from_str::<serde_json::Value>(payload) else {
        tracing::warn!(payload, "ignoring a malformed control message");
        return;
    };
    if let Some(id) = message.get("cancel").and_then(serde_json::Value::as_i64) {
        let running = shared.running.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned();
        if let Some(job) = running {
            tracing::info!(job.id = id, "cancelling running job on request");
            job.stop(StopReason::Cancelled);
        }
    }
    if let (Some(name), Some(paused)) = (
        message.get("queue").and_then(serde_json::Value::as_str),
        message.get("paused").and_then(serde_json::Value::as_bool),
    ) && let Some(queue) = shared.queues.get(name)
    {
        queue.paused.store(paused, Ordering::Release);
        queue.wake.notify_one();
    }
}
