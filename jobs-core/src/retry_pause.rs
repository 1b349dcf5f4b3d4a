//! The one back-off for retrying after a failure — a claim, an outcome write, the LISTEN
//! connection — that doubles after each failure up to a cap and starts over after a
//! success.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// The pause before the next retry.
#[derive(Debug, Clone)]
pub(crate) struct RetryPause {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl RetryPause {
    /// Pauses of `first`, then twice as long after each further failure, at most `max`.
    pub(crate) fn new(first: Duration, max: Duration) -> RetryPause {
        RetryPause { first, max: max.max(first), next: first }
    }

    /// After a failure: how long to wait before retrying (the next failure waits longer).
    pub(crate) fn failed(&mut self) -> Duration {
        let pause = self.next;
        self.next = (self.next * 2).min(self.max);
        pause
    }

    /// After a success: the next failure waits the shortest pause again.
    pub(crate) fn succeeded(&mut self) {
        self.next = self.first;
    }

    /// After a failure: sleeps the pause, or less if `stop` fires. Returns whether to retry
    /// (`false` when `stop` fired).
    pub(crate) async fn sleep_unless(&mut self, stop: &CancellationToken) -> bool {
        let pause = self.failed();
        tokio::select! {
            _ = tokio::time::sleep(pause) => true,
            _ = stop.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap_and_start_over_after_a_success() {
        let ms = Duration::from_millis;
        let mut pause = RetryPause::new(ms(50), ms(300));
        let waits: Vec<Duration> = (0..5).map(|_| pause.failed()).collect();
        assert_eq!(waits, [ms(50), ms(100), ms(200), ms(300), ms(300)]);
        pause.succeeded();
        assert_eq!(pause.failed(), ms(50));
    }
}
