//! The handle the worker keeps on each running job: its cancellation token and why it was
//! stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio_util::sync::CancellationToken;

/// Why a running job's token was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StopReason {
    /// Not stopped.
    None = 0,
    /// Someone cancelled the job.
    Cancelled = 1,
    /// The worker is shutting down past its deadline.
    Shutdown = 2,
}

/// The handle the worker keeps on each running job.
#[derive(Debug, Clone)]
pub(crate) struct RunningJob {
    pub(crate) token: CancellationToken,
    reason: Arc<AtomicU8>,
}

impl RunningJob {
    pub(crate) fn new() -> RunningJob {
        RunningJob {
            token: CancellationToken::new(),
            reason: Arc::new(AtomicU8::new(StopReason::None as u8)),
        }
    }

    /// Stops the job for `reason` (the first reason wins).
    pub(crate) fn stop(&self, reason: StopReason) {
        let _ = self.reason.compare_exchange(
            StopReason::None as u8,
            reason as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.token.cancel();
    }

    pub(crate) fn reason(&self) -> StopReason {
        match self.reason.load(Ordering::Acquire) {
            1 => StopReason::Cancelled,
            2 => StopReason::Shutdown,
            _ => StopReason::None,
        }
    }
}
