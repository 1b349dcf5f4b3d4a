//! [`JobsBackend`]: how a connection of the application's reaches its driver.

use jobs_driver::ConnectionDriver;

/// A diesel backend the jobs tables can live in: the backend of a connection the
/// application passes to `J::enqueue(&mut tx, args)`, `J::enqueue_sync`, `cancel_job`,
/// `migrate` and the rest. Implemented (in `drivers.rs`) for the backend of each driver of the build;
/// the operations are its driver's [`ConnectionDriver`] ones, and their SQL stays in the
/// driver crate.
pub trait JobsBackend: diesel::backend::Backend + Sized {
    /// The driver that works on this backend's connections.
    type Driver: ConnectionDriver<Backend = Self>;
}
