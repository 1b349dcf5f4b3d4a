//! The conformance suite of the jobs framework: every behaviour of the runtime, written once
//! against the driver seam (`jobs_driver::Driver` and `ConnectionDriver`), for any driver to
//! run with one macro call.
//!
//! A backend implements [`Backend`]: a fresh migrated database per case, as a driver, and
//! connections of the application's own (async and sync) for the transactional cases. One
//! [`suite!`] call then instantiates every case as a test, naming the capabilities the
//! backend lacks: a case that needs one of them is `#[ignore]`d with a reason that names
//! it, so `cargo test` reports it as skipped, and a generated test checks the list against
//! the backend's capabilities (every capability a case needs and the backend lacks is
//! listed, and nothing the backend has), so nothing passes silently.
//!
//! ```ignore
//! struct Sqlite;
//!
//! #[async_trait::async_trait]
//! impl jobs_conformance::Backend for Sqlite {
//!     const CAPABILITIES: Capabilities = jobs_sqlite::CAPABILITIES;
//!     async fn database(connections: usize) -> jobs_conformance::TestDb { /* … */ }
//! }
//!
//! jobs_conformance::suite! {
//!     backend: Sqlite;
//!     lacks: [SkipLocked, CountEstimates];
//! }
//! ```
//!
//! Cases put jobs into a given state through the row factory ([`factory`]), never through
//! raw SQL, and observe them through the driver's reads. Their jobs are in [`jobs`]. The
//! model-based test ([`model`]), which `suite!` runs too, empties the framework's tables
//! between its cases with `DELETE FROM` on the application's connection: the one statement
//! of the suite's own.

pub mod app_transaction;
mod backend;
pub mod cases;
mod catalogue;
pub mod factory;
pub mod jobs;
pub mod keyed;
pub mod model;
mod suite;

use jobs_core::Registry;

pub use app_transaction::{AppTransaction, SyncAppTransaction};
pub use backend::{Backend, DEADLINE, TestDb};
pub use catalogue::{CASES, Case};
pub use suite::{check_lacks, run};

/// What the macros' expansions name, so that a caller needs no crate but this one.
#[doc(hidden)]
pub mod __private {
    pub use jobs_core::driver::Capability;
}

/// The suite's registry of jobs.
pub fn registry() -> Registry {
    jobs::registry()
}
