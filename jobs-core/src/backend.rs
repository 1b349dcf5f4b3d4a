//! The diesel backends whose own connections the API accepts: enqueue inside the caller's
//! transaction (`J::enqueue(&mut tx, args)`, `J::enqueue_sync(&mut conn, args)`), and
//! cancel, retry, delete or pause in it ([`cancel_job`](crate::cancel_job),
//! [`set_queue_paused`](crate::set_queue_paused), …), on any async or sync connection of
//! a supported backend.
//!
//! Each backend's implementation calls its driver's connection-level operations; the SQL
//! stays in the driver.

use std::future::Future;

use diesel::connection::LoadConnection;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::{Inserted, JobRow, JobState, NewJob, Result};

mod sealed {
    pub trait Sealed {}
}

pub(crate) use sealed::Sealed;

/// A diesel backend the jobs tables live in (with the `postgres` feature:
/// `diesel::pg::Pg`). Implemented by this crate for each driver it is built with; the
/// methods are the driver's operations on a connection the application owns.
pub trait JobsBackend: diesel::backend::Backend + Sealed + Sized {
    /// Inserts `jobs` in whatever transaction `conn` is in; their wake-up goes out when it
    /// commits. (`AsyncConnection`, not only `AsyncConnectionCore`: where the server cannot
    /// return the rows it inserted, as on MySQL, the insert reads them back in a transaction,
    /// its own when the connection is not in one.)
    fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> impl Future<Output = Result<Vec<Inserted>>> + Send
    where
        C: AsyncConnection<Backend = Self>;

    /// [`insert`](Self::insert) on a synchronous diesel connection.
    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Self>;

    /// Cancels `ids` (see `jobs_driver::JobCancelManyParams`).
    fn cancel<C>(conn: &mut C, ids: &[i64]) -> impl Future<Output = Result<Vec<JobState>>> + Send
    where
        C: AsyncConnectionCore<Backend = Self> + Send;

    /// Retries `ids` (see `jobs_driver::JobRetryManyParams`).
    fn retry<C>(conn: &mut C, ids: &[i64]) -> impl Future<Output = Result<jobs_driver::Retried>> + Send
    where
        C: AsyncConnectionCore<Backend = Self> + Send;

    /// Deletes `ids` (see `jobs_driver::JobDeleteManyParams`).
    fn delete<C>(conn: &mut C, ids: &[i64]) -> impl Future<Output = Result<i64>> + Send
    where
        C: AsyncConnectionCore<Backend = Self> + Send;

    /// Pauses or resumes `queue` (see `jobs_driver::QueueSetPausedParams`).
    fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> impl Future<Output = Result<()>> + Send
    where
        C: AsyncConnectionCore<Backend = Self> + Send;

    /// Loads job `id`.
    fn get<C>(conn: &mut C, id: i64) -> impl Future<Output = Result<Option<JobRow>>> + Send
    where
        C: AsyncConnectionCore<Backend = Self> + Send;

    /// Applies the backend's pending migrations on `conn`.
    fn migrate<C>(conn: C) -> impl Future<Output = Result<Vec<String>>>
    where
        C: AsyncConnection<Backend = Self> + 'static;
}
