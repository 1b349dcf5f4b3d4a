//! A running worker: [`WorkerHandle`], and its graceful shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jobs_driver::NodeDeleteParams;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::running_jobs::StopReason;
use super::shared::Shared;
use crate::error::Result;
use crate::maintenance::ServiceContext;

/// What a graceful shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Jobs still running at the deadline, cancelled and handed back to the queue without
    /// using up their attempt.
    pub handed_back: usize,
}

/// A running worker. Call [`shutdown`](WorkerHandle::shutdown) to stop it cleanly.
pub struct WorkerHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) stop_fetch: CancellationToken,
    pub(super) stop_completer: CancellationToken,
    pub(super) give_up: CancellationToken,
    pub(super) stop_services: CancellationToken,
    pub(super) completer: JoinHandle<()>,
    pub(super) producers: Vec<JoinHandle<()>>,
    pub(super) services: Vec<JoinHandle<()>>,
    pub(super) shutdown_timeout: Duration,
    pub(super) service_ctx: ServiceContext,
}

impl WorkerHandle {
    /// The node's name.
    pub fn node(&self) -> &str {
        &self.shared.node
    }

    /// Whether this node currently holds the leader lease.
    pub fn is_leader(&self) -> bool {
        self.service_ctx.is_leader()
    }

    /// Whether notifications arrive (the driver's listener is connected, so wake-ups come
    /// without polling).
    pub fn is_listening(&self) -> bool {
        self.shared.listening.load(Ordering::Acquire)
    }

    /// How many jobs are running on this node now (buffered ones not included).
    pub fn running(&self) -> usize {
        let held = self.shared.running.lock().unwrap_or_else(|e| e.into_inner()).len();
        held.saturating_sub(self.buffered())
    }

    /// How many claimed jobs wait in this node's buffers for a slot (see
    /// [`WorkerBuilder::prefetch_window`](super::WorkerBuilder::prefetch_window)).
    pub fn buffered(&self) -> usize {
        self.shared.queues.values().map(|q| q.buffered()).sum()
    }

    /// How many claim statements this node has issued for `queue` (0 for a queue it
    /// does not run).
    pub fn fetch_count(&self, queue: &str) -> u64 {
        self.shared.queues.get(queue).map_or(0, |q| q.fetches.load(Ordering::Relaxed))
    }

    /// The context the node's maintenance services run with.
    pub fn service_context(&self) -> &ServiceContext {
        &self.service_ctx
    }

    /// Stops gracefully: stops fetching and hands back the buffered jobs (their attempt
    /// given back); lets running jobs finish until the shutdown timeout; then cancels the rest and hands them back as retryable without using up
    /// their attempt; writes every outcome; releases the leader lease and unregisters the
    /// node. Nothing is left `running`.
    pub async fn shutdown(self) -> Result<ShutdownReport> {
        tracing::info!(node = %self.shared.node, "worker shutting down");
        self.stop_fetch.cancel();
        for producer in self.producers {
            let _ = producer.await;
        }
        self.shared.tracker.close();
        let mut handed_back = 0;
        if tokio::time::timeout(self.shutdown_timeout, self.shared.tracker.wait()).await.is_err() {
            let running = self.shared.running.lock().unwrap_or_else(|e| e.into_inner()).handles();
            handed_back = running.len();
            tracing::warn!(jobs = handed_back, "shutdown deadline passed; handing running jobs back");
            for job in running {
                job.stop(StopReason::Shutdown);
            }
            self.shared.tracker.wait().await;
        }
        self.stop_completer.cancel();
        // Give the final writes a bounded time if the database is unreachable.
        let give_up = self.give_up.clone();
        let deadline = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            give_up.cancel();
        });
        let _ = self.completer.await;
        deadline.abort();
        self.stop_services.cancel();
        for service in self.services {
            let _ = service.await;
        }
        self.shared.driver.node_delete(NodeDeleteParams { node: &self.shared.node }).await?;
        tracing::info!(node = %self.shared.node, handed_back, "worker stopped");
        Ok(ShutdownReport { handed_back })
    }

    /// Stops every task at once without writing anything back, as if the process had
    /// died: running and buffered jobs stay `running` for the rescuer. For tests of crash
    /// recovery.
    pub fn kill(self) {
        self.completer.abort();
        for queue in self.shared.queues.values() {
            drop(queue.buffer.lock().unwrap_or_else(|e| e.into_inner()).close());
        }
        for task in self.producers.iter().chain(&self.services) {
            task.abort();
        }
        let running = self.shared.running.lock().unwrap_or_else(|e| e.into_inner()).handles();
        for job in running {
            job.stop(StopReason::Shutdown);
        }
    }
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle").field("node", &self.shared.node).finish_non_exhaustive()
    }
}
