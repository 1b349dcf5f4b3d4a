//! The second half of a driver: what it does on connections it does not own. The
//! [`Driver`](crate::Driver) runs the engine's statements on its own pool; a
//! [`ConnectionDriver`] runs the application's on the application's connection, inside
//! its transaction (enqueue with the business writes: roll back, and the job never
//! existed), and opens a driver from a URL.
//!
//! `jobs-core` reaches these through the diesel backend of the caller's connection
//! (`JobsBackend::Driver`), so `send_welcome::enqueue(&mut tx, args)` works on any
//! backend the build has.

use std::future::Future;
use std::sync::Arc;

use diesel::connection::LoadConnection;
use diesel_async::{AsyncConnection, AsyncConnectionCore};

use crate::driver::Driver;
use crate::error::Result;
use crate::job::{Inserted, JobRow, NewJob, Retried};
use crate::state::JobState;
use crate::workflow::{BatchChange, BatchChanged, InsertedWorkflow, NewWorkflow};

/// A driver's operations on a connection of the application's own, and its URL schemes.
/// Each driver crate implements it on its driver type, beside [`Driver`].
///
/// The job and queue operations commit or roll back with the connection's transaction, and
/// their notifications (wake-ups, control messages) go out when that transaction commits;
/// on a connection outside a transaction each commits by itself (MySQL's insert: per 100
/// rows, or in a transaction of its own where it reads the rows back). `migrate` runs
/// its own transactions (and MySQL's DDL commits by itself).
pub trait ConnectionDriver: Driver + Sized + 'static {
    /// The diesel backend of the connections this driver works on.
    type Backend: diesel::backend::Backend;

    /// The URL schemes [`open`](Self::open) reads, without `:` (`["postgres", "postgresql"]`).
    const URL_SCHEMES: &'static [&'static str];

    /// An example URL for error messages (`postgres://user:password@host:5432/database`).
    const URL_EXAMPLE: &'static str;

    /// Opens the driver on a pool of at most `max_connections` to `url`, whose scheme is
    /// one of [`URL_SCHEMES`](Self::URL_SCHEMES). Connects lazily: a server that cannot be
    /// reached, or a URL it cannot read, fails on first use (SQLite checks the file's
    /// directory here).
    fn open(url: &str, max_connections: usize) -> Result<Self>;

    /// Inserts `jobs` (validated) in input order, in whatever transaction `conn` is in; a
    /// job whose uniqueness key is held comes back as the existing job. Where the server
    /// cannot return the rows it inserted (MySQL), the insert reads them back in a
    /// transaction, its own when the connection is not in one: hence `AsyncConnection`.
    fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> impl Future<Output = Result<Vec<Inserted>>> + Send
    where
        C: AsyncConnection<Backend = Self::Backend>;

    /// [`insert`](Self::insert) on a synchronous diesel connection.
    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Self::Backend>;

    /// Inserts `workflow` (see [`insert_workflow`](crate::workflow::insert_workflow)) in
    /// whatever transaction `conn` is in, or in one of its own.
    fn insert_workflow<C>(
        conn: &mut C,
        workflow: &NewWorkflow,
    ) -> impl Future<Output = Result<InsertedWorkflow>> + Send
    where
        C: AsyncConnection<Backend = Self::Backend>;

    /// Applies `change` to a batch (see [`change_batch`](crate::workflow::change_batch)) in
    /// whatever transaction `conn` is in, or in one of its own.
    fn change_batch<C>(
        conn: &mut C,
        change: &BatchChange,
    ) -> impl Future<Output = Result<BatchChanged>> + Send
    where
        C: AsyncConnection<Backend = Self::Backend>;

    /// Cancels the jobs of `ids` that are not finished and returns the state each changed
    /// job is now in: `Cancelled`, or `Running` for one told to stop (see
    /// [`JobCancelManyParams`](crate::JobCancelManyParams)).
    fn cancel<C>(conn: &mut C, ids: &[i64]) -> impl Future<Output = Result<Vec<JobState>>> + Send
    where
        C: AsyncConnectionCore<Backend = Self::Backend> + Send;

    /// Makes the jobs of `ids` that are neither running nor pending (waiting for their
    /// dependencies) available now (`pending` for one with dependencies unfinished or
    /// failed), but those whose uniqueness key another job holds (see [`Retried`]), and
    /// re-opens their dependents' edges ([`reopen`](crate::workflow::reopen)): in
    /// whatever transaction `conn` is in, or in one of its own.
    fn retry<C>(conn: &mut C, ids: &[i64]) -> impl Future<Output = Result<Retried>> + Send
    where
        C: AsyncConnection<Backend = Self::Backend>;

    /// Deletes the jobs of `ids` that are not running; returns how many it deleted.
    fn delete<C>(conn: &mut C, ids: &[i64]) -> impl Future<Output = Result<i64>> + Send
    where
        C: AsyncConnectionCore<Backend = Self::Backend> + Send;

    /// Pauses (`true`) or resumes (`false`) `queue` on every node.
    fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> impl Future<Output = Result<()>> + Send
    where
        C: AsyncConnectionCore<Backend = Self::Backend> + Send;

    /// Loads job `id`.
    fn get<C>(conn: &mut C, id: i64) -> impl Future<Output = Result<Option<JobRow>>> + Send
    where
        C: AsyncConnectionCore<Backend = Self::Backend> + Send;

    /// Applies the pending migrations of the jobs schema on `conn` and returns the
    /// versions applied (none when current).
    fn migrate<C>(conn: C) -> impl Future<Output = Result<Vec<String>>>
    where
        C: AsyncConnection<Backend = Self::Backend> + 'static;

    /// [`open`](Self::open), shared as the engine takes it.
    fn open_shared(url: &str, max_connections: usize) -> Result<Arc<dyn Driver>> {
        Ok(Arc::new(Self::open(url, max_connections)?))
    }
}

/// Opens a transaction on `conn` unless it is in one; returns whether it did (hand that
/// to [`end_own_transaction`] with the outcome of what ran in it). Opened and closed by
/// hand, not with `AsyncConnection::transaction`: its callback's future, nested in another
/// transaction's, would have to be `Send` for every lifetime, which the compiler cannot
/// prove.
pub async fn begin_own_transaction<C: AsyncConnection>(conn: &mut C) -> Result<bool> {
    use diesel_async::TransactionManager;
    let own = C::TransactionManager::transaction_manager_status_mut(conn).transaction_depth()?.is_none();
    if own {
        C::TransactionManager::begin_transaction(conn).await?;
    }
    Ok(own)
}

/// Ends the transaction [`begin_own_transaction`] opened (`own`): commits it when
/// `outcome` is a success, rolls it back when not. Leaves the caller's transaction alone.
pub async fn end_own_transaction<C: AsyncConnection, T>(
    conn: &mut C,
    own: bool,
    outcome: Result<T>,
) -> Result<T> {
    use diesel_async::TransactionManager;
    if !own {
        return outcome;
    }
    match outcome {
        Ok(done) => {
            C::TransactionManager::commit_transaction(conn).await?;
            Ok(done)
        }
        // A rollback that fails marks the connection broken (the pool drops it); the
        // error reported is the one that caused it, which still says what happened (and
        // whether retrying may help).
        Err(error) => {
            if let Err(rollback) = C::TransactionManager::rollback_transaction(conn).await {
                tracing::debug!(%rollback, %error, "a rollback failed after its transaction's error");
            }
            Err(error)
        }
    }
}
