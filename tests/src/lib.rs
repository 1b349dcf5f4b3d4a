//! Shared helpers for the end-to-end tests: the application connections each backend gives
//! the conformance suite (`jobs-conformance`), and the jobs of the fault-injection tests.

pub mod any_db;
pub mod app;
pub mod app_connections;
pub mod browser;
pub mod fault_jobs;
pub mod faults;
pub mod log_sink;
pub mod processes;
pub mod traced;

/// The conformance suite (`jobs-conformance`), as the tests have always named it.
pub use jobs_conformance as conformance;
/// Waits on a condition with a deadline (the helper `jobs_core::testing` offers users).
pub use jobs_core::testing::wait_for;
