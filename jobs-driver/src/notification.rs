//! What a driver's [`Listener`](crate::Listener) delivers, and the one encoding of it that
//! every driver stores or sends: a channel name and a text payload.

/// The channel on which inserts, the scheduler and retries announce available jobs; the
/// payload is the queue's name. A macro so that drivers can splice it into SQL text with
/// `concat!`; [`AVAILABLE_CHANNEL`] is the same name as a constant.
#[macro_export]
macro_rules! available_channel {
    () => {
        "jobs_available"
    };
}

/// The channel for control messages: `{"cancel": <id>}` and
/// `{"queue": <name>, "paused": <bool>}` (see [`Notification::encode`]). A macro for the
/// same reason as [`available_channel!`].
#[macro_export]
macro_rules! control_channel {
    () => {
        "jobs_control"
    };
}

/// The channel on which available jobs are announced (the payload is the queue).
pub const AVAILABLE_CHANNEL: &str = available_channel!();

/// The channel for control messages.
pub const CONTROL_CHANNEL: &str = control_channel!();

/// A message pushed to every node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notification {
    /// Jobs may have become available on `queue` (an insert, the scheduler, a retry).
    JobsAvailable {
        /// The queue.
        queue: String,
    },
    /// Someone asked for running job `id` to stop.
    CancelJob {
        /// The job.
        id: i64,
    },
    /// `queue` was paused or resumed.
    QueuePaused {
        /// The queue.
        queue: String,
        /// Its new flag.
        paused: bool,
    },
}

impl Notification {
    /// The notification as a `(channel, payload)` pair.
    ///
    /// ```
    /// use jobs_driver::{CONTROL_CHANNEL, Notification};
    ///
    /// let cancel = Notification::CancelJob { id: 7 };
    /// let (channel, payload) = cancel.encode();
    /// assert_eq!((channel, payload.as_str()), (CONTROL_CHANNEL, r#"{"cancel":7}"#));
    /// assert_eq!(Notification::decode(channel, &payload), Some(cancel));
    /// ```
    pub fn encode(&self) -> (&'static str, String) {
        match self {
            Notification::JobsAvailable { queue } => (AVAILABLE_CHANNEL, queue.clone()),
            Notification::CancelJob { id } => {
                (CONTROL_CHANNEL, serde_json::json!({ "cancel": id }).to_string())
            }
            Notification::QueuePaused { queue, paused } => {
                (CONTROL_CHANNEL, serde_json::json!({ "queue": queue, "paused": paused }).to_string())
            }
        }
    }

    /// The notification a `(channel, payload)` pair carries: `None` for another channel, a
    /// malformed or an unknown control message.
    pub fn decode(channel: &str, payload: &str) -> Option<Notification> {
        if channel == AVAILABLE_CHANNEL {
            return Some(Notification::JobsAvailable { queue: payload.to_owned() });
        }
        if channel != CONTROL_CHANNEL {
            return None;
        }
        let message = serde_json::from_str::<serde_json::Value>(payload).ok()?;
        if let Some(id) = message.get("cancel").and_then(serde_json::Value::as_i64) {
            return Some(Notification::CancelJob { id });
        }
        match (
            message.get("queue").and_then(serde_json::Value::as_str),
            message.get("paused").and_then(serde_json::Value::as_bool),
        ) {
            (Some(queue), Some(paused)) => {
                Some(Notification::QueuePaused { queue: queue.to_owned(), paused })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_become_notifications_and_back() {
        let all = [
            Notification::JobsAvailable { queue: "mailers".into() },
            Notification::CancelJob { id: 7 },
            Notification::QueuePaused { queue: "q".into(), paused: true },
        ];
        for n in all {
            let (channel, payload) = n.encode();
            assert_eq!(Notification::decode(channel, &payload), Some(n));
        }
        assert_eq!(
            Notification::decode(CONTROL_CHANNEL, r#"{"queue": "q", "paused": false}"#),
            Some(Notification::QueuePaused { queue: "q".into(), paused: false })
        );
        assert_eq!(Notification::decode(CONTROL_CHANNEL, "not json"), None);
        assert_eq!(Notification::decode(CONTROL_CHANNEL, r#"{"what": 1}"#), None);
        assert_eq!(Notification::decode("other", "x"), None);
    }
}
