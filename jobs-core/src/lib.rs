//! Postgres-backed background jobs for diesel and tokio.
//!
//! (Crate docs are completed with the job API.)

#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as jobs_core;

pub mod clock;
pub mod db;
mod error;
pub mod migrate;
pub mod schema;
mod state;
#[cfg(feature = "testing")]
pub mod testing;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, Result};
pub use migrate::migrate;
pub use state::{JobState, ParseStateError};
