//! Shared helpers for the end-to-end tests: the conformance suite every backend runs, and
//! the jobs of the fault-injection tests.

pub mod any_db;
pub mod app;
pub mod browser;
pub mod conformance;
pub mod fault_jobs;
pub mod faults;
pub mod log_sink;
pub mod model;
pub mod processes;

/// Waits on a condition with a deadline (the helper `jobs_core::testing` offers users).
pub use jobs_core::testing::wait_for;
