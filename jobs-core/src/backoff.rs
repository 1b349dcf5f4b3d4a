//! How long a failed job waits before its next attempt.

use std::time::Duration;

/// A retry delay policy, chosen per job (`#[job(backoff = ...)]` or
/// [`JobOptions::backoff`](crate::JobOptions::backoff)).
///
/// `attempt` is the attempt that just failed, starting at 1. Every policy but `Custom`
/// adds a random jitter of up to 10 % so that jobs failing together do not retry together.
#[derive(Debug, Clone, Copy, Default)]
pub enum Backoff {
    /// `attempt⁴ + 15` seconds: 16 s, 31 s, 96 s, 271 s, 640 s, … about 1.8 days by
    /// attempt 20. The default.
    #[default]
    Polynomial,
    /// `base × 2^(attempt − 1)`, capped at `max`.
    Exponential {
        /// The first delay.
        base: Duration,
        /// The longest delay.
        max: Duration,
    },
    /// `step × attempt`, capped at `max`.
    Linear {
        /// Added per attempt.
        step: Duration,
        /// The longest delay.
        max: Duration,
    },
    /// The same delay every time.
    Constant(Duration),
    /// Your own function of the failed attempt's number; no jitter is added.
    Custom(fn(attempt: i32) -> Duration),
}

impl Backoff {
    /// The delay before the retry after `attempt` failed, without jitter.
    pub fn base_delay(&self, attempt: i32) -> Duration {
        let attempt = attempt.max(1);
        match *self {
            Backoff::Polynomial => {
                let n = u64::try_from(attempt).unwrap_or(1);
                Duration::from_secs(n.saturating_pow(4).saturating_add(15))
            }
            Backoff::Exponential { base, max } => {
                let shift = u32::try_from(attempt - 1).unwrap_or(0).min(40);
                base.saturating_mul(1u32 << shift.min(31)).min(max)
            }
            Backoff::Linear { step, max } => {
                step.saturating_mul(u32::try_from(attempt).unwrap_or(u32::MAX)).min(max)
            }
            Backoff::Constant(delay) => delay,
            Backoff::Custom(f) => f(attempt),
        }
    }

    /// The largest jitter added to [`base_delay`](Self::base_delay), as a fraction of it.
    pub fn jitter_fraction(&self) -> f64 {
        match self {
            Backoff::Custom(_) => 0.0,
            _ => 0.1,
        }
    }

    /// The delay to apply: the base delay plus a random jitter.
    pub fn delay(&self, attempt: i32) -> Duration {
        let base = self.base_delay(attempt);
        let jitter = self.jitter_fraction();
        if jitter == 0.0 {
            return base;
        }
        base.mul_f64(1.0 + rand::random::<f64>() * jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomial_is_attempt_to_the_fourth_plus_fifteen_seconds() {
        let b = Backoff::Polynomial;
        assert_eq!(b.base_delay(1), Duration::from_secs(16));
        assert_eq!(b.base_delay(2), Duration::from_secs(31));
        assert_eq!(b.base_delay(5), Duration::from_secs(640));
        for attempt in 1..30 {
            let d = b.delay(attempt);
            let base = b.base_delay(attempt);
            assert!(d >= base && d <= base.mul_f64(1.1), "attempt {attempt}: {d:?} vs {base:?}");
        }
    }

    #[test]
    fn exponential_doubles_and_caps() {
        let b = Backoff::Exponential { base: Duration::from_secs(2), max: Duration::from_secs(60) };
        assert_eq!(b.base_delay(1), Duration::from_secs(2));
        assert_eq!(b.base_delay(3), Duration::from_secs(8));
        assert_eq!(b.base_delay(10), Duration::from_secs(60));
        assert_eq!(b.base_delay(1000), Duration::from_secs(60));
    }

    #[test]
    fn linear_and_constant_and_custom() {
        let l = Backoff::Linear { step: Duration::from_secs(5), max: Duration::from_secs(12) };
        assert_eq!(l.base_delay(2), Duration::from_secs(10));
        assert_eq!(l.base_delay(3), Duration::from_secs(12));
        assert_eq!(Backoff::Constant(Duration::from_millis(7)).base_delay(9), Duration::from_millis(7));
        fn custom(attempt: i32) -> Duration {
            Duration::from_millis(attempt as u64)
        }
        assert_eq!(Backoff::Custom(custom).delay(42), Duration::from_millis(42));
    }
}
