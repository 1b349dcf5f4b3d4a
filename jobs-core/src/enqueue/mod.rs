//! Enqueueing jobs: typed requests ([`request`]), by kind name ([`by_kind`]), many at
//! once; inside the caller's transaction, on any connection of a supported backend, a
//! pool, or a driver ([`enqueuer`]), async or sync ([`insert`]).

mod by_kind;
mod enqueuer;
mod insert;
mod overrides;
mod request;

pub use by_kind::KindRequest;
pub use enqueuer::Enqueuer;
#[cfg(feature = "testing")]
pub(crate) use insert::enqueue_through;
pub use insert::{Enqueued, IntoNewJob, enqueue_many, enqueue_many_sync};
pub use overrides::validate_queue;
pub use request::{EnqueueRequest, JobExt};
