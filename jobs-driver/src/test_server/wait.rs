//! [`wait_until`]: the one wait on a server process's state (a database server or a pooler
//! that test support started), which no call reports by itself.

use std::time::{Duration, Instant};

use crate::error::{DriverError, Result};

/// Checks `done` until it says yes, fails, or `timeout` passes (then a
/// [`DriverError::Server`] naming `what`).
pub fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !done()? {
        if Instant::now() > deadline {
            return Err(DriverError::Server(format!("timed out after {timeout:?} waiting for {what}")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
