//! The channel that hands this process's own notifications to its listeners at once,
//! shared by every driver on one database URL in the process (the table carries them to
//! other processes, at their next read).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use jobs_driver::Notification;
use tokio::sync::broadcast;

/// This process's notifications for one database.
pub(crate) type Hub = broadcast::Sender<Notification>;

/// The hub of the database at `url`, created by the first driver on it.
pub(crate) fn for_url(url: &str) -> Arc<Hub> {
    static HUBS: Mutex<Option<HashMap<String, Weak<Hub>>>> = Mutex::new(None);
    let mut hubs = HUBS.lock().unwrap_or_else(|e| e.into_inner());
    let hubs = hubs.get_or_insert_with(HashMap::new);
    hubs.retain(|_, hub| hub.strong_count() > 0);
    if let Some(hub) = hubs.get(url).and_then(Weak::upgrade) {
        return hub;
    }
    let hub = Arc::new(broadcast::channel(1024).0);
    hubs.insert(url.to_owned(), Arc::downgrade(&hub));
    hub
}

/// Delivers `notifications` (committed) to this process's listeners.
pub(crate) fn publish(hub: &Hub, notifications: &[Notification]) {
    for n in notifications {
        // No listener yet is not an error: nobody in this process waits.
        let _ = hub.send(n.clone());
    }
}
