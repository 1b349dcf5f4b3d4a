//! Shared helpers for the end-to-end tests, and the jobs of the fault-injection tests.

pub mod fault_jobs;
pub mod faults;
pub mod processes;

/// Waits on a condition with a deadline (the helper `jobs_core::testing` offers users).
pub use jobs_core::testing::wait_for;
