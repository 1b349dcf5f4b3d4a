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

/// One run of a job: its id and the attempt it was claimed at. A node may hold two runs
/// of one job at once: a run it kept going after the job was rescued from it (a frozen
/// process that woke up) and the run of its new claim of the same job. Each has its own
/// entry, cancellation handle and outcome.
pub(crate) type Run = (i64, i32);

/// The runs a node holds in memory, running or buffered, with their handles: by job id,
/// then attempt (a cancellation names the job; an outcome, the run).
#[derive(Debug, Default)]
pub(crate) struct Runs {
    by_job: rustc_hash::FxHashMap<i64, Vec<(i32, RunningJob)>>,
    len: usize,
}

impl Runs {
    /// Adds run `run` with its handle.
    pub(crate) fn insert(&mut self, (id, attempt): Run, handle: RunningJob) {
        let runs = self.by_job.entry(id).or_default();
        match runs.iter_mut().find(|(a, _)| *a == attempt) {
            Some(entry) => entry.1 = handle,
            None => {
                runs.push((attempt, handle));
                self.len += 1;
            }
        }
    }

    /// Removes run `run`, leaving the job's other runs.
    pub(crate) fn remove(&mut self, (id, attempt): Run) {
        if let Some(runs) = self.by_job.get_mut(&id) {
            let before = runs.len();
            runs.retain(|(a, _)| *a != attempt);
            self.len -= before - runs.len();
            if runs.is_empty() {
                self.by_job.remove(&id);
            }
        }
    }

    /// The handles of every run of job `id`.
    pub(crate) fn of_job(&self, id: i64) -> Vec<RunningJob> {
        self.by_job.get(&id).map(|runs| runs.iter().map(|(_, h)| h.clone()).collect()).unwrap_or_default()
    }

    /// The jobs with a run here.
    pub(crate) fn job_ids(&self) -> Vec<i64> {
        self.by_job.keys().copied().collect()
    }

    /// Every run's handle.
    pub(crate) fn handles(&self) -> Vec<RunningJob> {
        self.by_job.values().flat_map(|runs| runs.iter().map(|(_, h)| h.clone())).collect()
    }

    /// How many runs.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_runs_of_one_job_are_kept_apart() {
        let mut runs = Runs::default();
        let (old, new) = (RunningJob::new(), RunningJob::new());
        runs.insert((7, 1), old.clone());
        runs.insert((7, 2), new.clone());
        runs.insert((8, 1), RunningJob::new());
        assert_eq!(runs.len(), 3);
        // The old run ends: the new one is still held, and a cancel still reaches it.
        runs.remove((7, 1));
        assert_eq!(runs.len(), 2);
        let handles = runs.of_job(7);
        assert_eq!(handles.len(), 1);
        handles[0].stop(StopReason::Cancelled);
        assert!(new.token.is_cancelled() && !old.token.is_cancelled());
        runs.remove((7, 2));
        runs.remove((7, 2));
        assert_eq!((runs.len(), runs.job_ids()), (1, vec![8]));
    }
}
