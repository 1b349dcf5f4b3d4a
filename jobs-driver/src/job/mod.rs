//! Jobs as the engine and the drivers exchange them: a row to insert ([`NewJob`]), a batch
//! of them with each uniqueness key once ([`Deduplicated`]), what an insert did ([`Inserted`]), a stored row ([`JobRow`]), a claimed job and its outcome
//! ([`ClaimedJob`], [`Completion`]), the dashboard's filter ([`JobFilter`], [`Count`]), and
//! the parameters of every job operation.

mod deduplicated;
mod execution;
mod filter;
mod new_job;
mod params;
mod rescue;
mod row;

pub use deduplicated::Deduplicated;
pub use execution::{ClaimedJob, Completion, Timing};
pub use filter::{Count, JobFilter, JobOrder, json_contains, like_pattern};
pub use new_job::{DEFAULT_MAX_ATTEMPTS, Inserted, NewJob};
pub use params::*;
pub use rescue::{DEFAULT_MAX_NODE_LOSSES, NODE_LOST, RescueFate, RescueReason, Stuck, TIMED_OUT};
pub use row::{JobRow, MAX_GIVEN_BACK_ENTRIES};
