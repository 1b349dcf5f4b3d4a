//! What every driver on one database file shares within this process: its one writer
//! (see `writer`), the turn the writer and the async writes take, and the channel that
//! wakes this process's listeners at once.
//!
//! SQLite lets one connection write at a time. Writers of one process that met at the
//! file lock would each sleep in SQLite's busy handler (1 ms, 2 ms, 5 ms, … 100 ms
//! between tries); one writer per process, and a turn for the rest, hand the lock on the
//! moment it is free. Writers of other processes still meet at the file lock, bounded by
//! the busy timeout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use jobs_driver::{DriverError, Notification, Result};
use tokio::sync::broadcast;

use crate::pool::{ConnectionSettings, connect_sync_with};
use crate::writer::Writer;

/// The shared state of one database file in this process.
#[derive(Debug)]
pub(crate) struct Local {
    /// This process's turn to write: held by the writer for each group transaction, and
    /// by each async write (on a pooled connection) for its transaction.
    pub(crate) write_gate: Arc<tokio::sync::Mutex<()>>,
    /// Notifications committed by this process, delivered to its listeners without
    /// waiting for their next read of `job_notifications`.
    pub(crate) wake: broadcast::Sender<Notification>,
    path: PathBuf,
    settings: ConnectionSettings,
    writer: tokio::sync::Mutex<Option<Arc<Writer>>>,
}

impl Local {
    /// This process's writer for the file, started on first use.
    pub(crate) async fn writer(&self) -> Result<Arc<Writer>> {
        let mut writer = self.writer.lock().await;
        if let Some(writer) = &*writer {
            return Ok(writer.clone());
        }
        let (path, settings) = (self.path.clone(), self.settings);
        let conn = tokio::task::spawn_blocking(move || connect_sync_with(&path, settings)).await.map_err(
            |e| DriverError::Runtime(format!("opening the SQLite writer's connection panicked: {e}")),
        )??;
        let started = Arc::new(Writer::start(conn, self.write_gate.clone())?);
        *writer = Some(started.clone());
        Ok(started)
    }
}

/// The state shared by the drivers on the file at `path` (created by the first of them,
/// whose connection settings its writer uses).
pub(crate) fn for_file(path: &Path, settings: ConnectionSettings) -> Arc<Local> {
    static FILES: Mutex<Option<HashMap<PathBuf, Weak<Local>>>> = Mutex::new(None);
    let key = canonical(path);
    let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    let files = files.get_or_insert_with(HashMap::new);
    files.retain(|_, local| local.strong_count() > 0);
    if let Some(local) = files.get(&key).and_then(Weak::upgrade) {
        return local;
    }
    let local = Arc::new(Local {
        write_gate: Arc::new(tokio::sync::Mutex::new(())),
        wake: broadcast::channel(1024).0,
        path: path.to_path_buf(),
        settings,
        writer: tokio::sync::Mutex::new(None),
    });
    files.insert(key, Arc::downgrade(&local));
    local
}

/// The file's absolute path, also before the file exists (its directory is resolved).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    if let Ok(path) = path.canonicalize() {
        return path;
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return path.to_path_buf();
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    dir.canonicalize().map(|dir| dir.join(name)).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_on_one_file_share_one_gate_and_others_do_not() {
        let dir = std::env::temp_dir();
        let settings = ConnectionSettings::default();
        let a = for_file(&dir.join("jobs-local-a.db"), settings);
        let again = for_file(&dir.join(".").join("jobs-local-a.db"), settings);
        let b = for_file(&dir.join("jobs-local-b.db"), settings);
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
