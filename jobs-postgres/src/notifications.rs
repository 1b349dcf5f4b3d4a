//! The NOTIFY channels: their names are `jobs_driver`'s (the SQL that notifies splices them
//! in with `concat!`); the listener subscribes to them and decodes their payloads with
//! [`Notification::decode`].

use jobs_driver::Notification;
pub(crate) use jobs_driver::{AVAILABLE_CHANNEL, CONTROL_CHANNEL, available_channel, control_channel};

/// The notification a `(channel, payload)` pair carries, if any (a malformed control
/// message is logged and dropped).
pub(crate) fn parse(channel: &str, payload: &str) -> Option<Notification> {
    let notification = Notification::decode(channel, payload);
    if notification.is_none() && channel == CONTROL_CHANNEL {
        tracing::warn!(payload, "ignoring a malformed or unknown control message");
    }
    notification
}
