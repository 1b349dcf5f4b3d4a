//! The NOTIFY channels, named once: the SQL that notifies splices these names in with
//! `concat!`, the listener subscribes to them and turns their payloads into
//! [`Notification`]s.

use jobs_driver::Notification;

/// The channel on which inserts, the scheduler and retries announce available jobs; the
/// payload is the queue's name.
macro_rules! available_channel {
    () => {
        "jobs_available"
    };
}

/// The channel for control messages: `{"cancel": <id>}` (written by `jobs::control`) and
/// `{"queue": <name>, "paused": <bool>}` (written by `queues`).
macro_rules! control_channel {
    () => {
        "jobs_control"
    };
}

pub(crate) use {available_channel, control_channel};

/// The channel on which inserts, the scheduler and retries announce available jobs; the
/// payload is the queue's name.
pub const AVAILABLE_CHANNEL: &str = available_channel!();

/// The channel for control messages: `{"cancel": <id>}` and
/// `{"queue": <name>, "paused": <bool>}`.
pub const CONTROL_CHANNEL: &str = control_channel!();

/// The notification a `(channel, payload)` pair carries, if any.
pub(crate) fn parse(channel: &str, payload: &str) -> Option<Notification> {
    if channel == AVAILABLE_CHANNEL {
        return Some(Notification::JobsAvailable { queue: payload.to_owned() });
    }
    if channel != CONTROL_CHANNEL {
        return None;
    }
    let Ok(message) = serde_json::from_str::<serde_json::Value>(payload) else {
        tracing::warn!(payload, "ignoring a malformed control message");
        return None;
    };
    if let Some(id) = message.get("cancel").and_then(serde_json::Value::as_i64) {
        return Some(Notification::CancelJob { id });
    }
    match (
        message.get("queue").and_then(serde_json::Value::as_str),
        message.get("paused").and_then(serde_json::Value::as_bool),
    ) {
        (Some(queue), Some(paused)) => Some(Notification::QueuePaused { queue: queue.to_owned(), paused }),
        _ => {
            tracing::warn!(payload, "ignoring an unknown control message");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_become_notifications() {
        assert_eq!(
            parse(AVAILABLE_CHANNEL, "mailers"),
            Some(Notification::JobsAvailable { queue: "mailers".into() })
        );
        assert_eq!(parse(CONTROL_CHANNEL, r#"{"cancel": 7}"#), Some(Notification::CancelJob { id: 7 }));
        assert_eq!(
            parse(CONTROL_CHANNEL, r#"{"queue": "q", "paused": true}"#),
            Some(Notification::QueuePaused { queue: "q".into(), paused: true })
        );
        assert_eq!(parse(CONTROL_CHANNEL, "not json"), None);
        assert_eq!(parse("other", "x"), None);
    }
}
