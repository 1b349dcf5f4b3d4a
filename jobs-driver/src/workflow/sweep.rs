//! The settler's sweep, page by page: how a driver ends a page's settle.

use super::params::Settled;
use crate::error::Result;

/// Ends the settle of a sweep's page (`sweeping`, with the cursor `next` past it) or of
/// finished jobs named by a caller: `outcome` with the cursor set. A sweep's page whose
/// settle failed is logged and passed over (`more` set, `next` past it): its edges stay
/// unsettled and the sweep finds them again when it comes round, so that one page that
/// keeps failing (a dependent an application's transaction holds past the lock wait) does
/// not stop the sweep there for every page after it. A caller's settle returns its error.
pub fn finish_page(outcome: Result<Settled>, next: Option<i64>, sweeping: bool) -> Result<Settled> {
    match outcome {
        Ok(mut done) => {
            done.next = next;
            Ok(done)
        }
        Err(e) if sweeping => {
            tracing::warn!(error = %e, ?next, "a page of the settler's sweep failed: passed over until the sweep comes round");
            Ok(Settled { more: true, next, ..Settled::default() })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DriverError;

    #[test]
    fn a_failed_page_of_the_sweep_is_passed_over_and_a_callers_settle_fails() {
        let failed = || Err(DriverError::unexpected("lock wait timeout"));
        let passed = finish_page(failed(), Some(42), true).expect("passed over");
        assert_eq!(passed, Settled { more: true, next: Some(42), ..Settled::default() });
        assert!(finish_page(failed(), None, false).is_err(), "a caller's settle reports its error");
        let done = Settled { settled: 3, ..Settled::default() };
        assert_eq!(finish_page(Ok(done), Some(7), true).expect("settled").next, Some(7));
    }
}
