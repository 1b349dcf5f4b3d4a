//! The channel between the executors and the completer: each finished job's
//! [`Completion`] goes in, and the completer writes what queued up in batches.

use jobs_driver::Completion;
use tokio::sync::mpsc;

/// The executors' side of the completer.
#[derive(Debug, Clone)]
pub(crate) struct CompletionSender {
    tx: mpsc::Sender<Completion>,
}

impl CompletionSender {
    /// Queues an outcome for writing. Waits when the completer is far behind.
    pub(crate) async fn submit(&self, completion: Completion) {
        if let Err(e) = self.tx.send(completion).await {
            // Only after the completer stopped, which happens once every job finished.
            tracing::error!(
                job.id = e.0.id,
                "completion arrived after the completer stopped; the rescuer will retry the job"
            );
        }
    }
}

/// The completer's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CompleterConfig {
    /// The most outcomes written in one statement.
    pub(crate) max_batch: usize,
    /// The channel's capacity.
    pub(crate) capacity: usize,
}

impl Default for CompleterConfig {
    fn default() -> Self {
        CompleterConfig { max_batch: 2_000, capacity: 10_000 }
    }
}

/// Creates the channel.
pub(crate) fn channel(config: CompleterConfig) -> (CompletionSender, mpsc::Receiver<Completion>) {
    let (tx, rx) = mpsc::channel(config.capacity);
    (CompletionSender { tx }, rx)
}
