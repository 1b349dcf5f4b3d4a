//! Operations on a connection of the application's own, so that they commit or roll back
//! with its transaction: insert jobs (async or sync diesel), cancel, retry or delete jobs,
//! pause or resume a queue, read a job. Their notifications are rows of
//! `job_notifications` written in the same transaction, so every worker learns of them
//! once it commits (within `SqliteDriver::notification_poll`). `jobs-core` calls these
//! for `Enqueuer for &mut C`, `enqueue_sync`, `cancel_job`, `retry_job`, `delete_job` and
//! `set_queue_paused` on SQLite connections.

use diesel::connection::LoadConnection;
use diesel::sqlite::Sqlite;
use diesel_async::AsyncConnectionCore;
use jobs_driver::{Inserted, JobState, NewJob, Result};

use crate::jobs::{control, insert};
use crate::time::now_ms;

pub use crate::jobs::read::get_async as get;
pub use crate::migrate::migrate;

/// Inserts `jobs` (validated) in `conn`'s transaction, in input order; a job whose
/// uniqueness key is held comes back as the existing job.
pub async fn insert_many<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    Ok(insert::insert_many_async(conn, jobs, now_ms(None)).await?.0)
}

/// [`insert_many`] on a synchronous diesel connection (`SqliteConnection`, pooled or not).
pub fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: LoadConnection<Backend = Sqlite>,
{
    insert::insert_many_sync(conn, jobs, now_ms(None)).map(|(inserted, _)| inserted)
}

/// Cancels the jobs of `ids` that are not finished (see `jobs_driver::JobCancelManyParams`).
pub async fn cancel_many<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    Ok(control::cancel_many(conn, ids, now_ms(None)).await?.0)
}

/// Makes the jobs of `ids` that are not running available now, but those whose uniqueness
/// key another job holds (see `jobs_driver::Retried`).
pub async fn retry_many<C>(conn: &mut C, ids: &[i64]) -> Result<jobs_driver::Retried>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    Ok(control::retry_many(conn, ids, now_ms(None)).await?.0)
}

/// Deletes the jobs of `ids` that are not running.
pub async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    control::delete_many(conn, ids).await
}

/// Pauses (`true`) or resumes (`false`) `queue` on every node.
pub async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    crate::queues::set_paused(conn, queue, paused, now_ms(None)).await.map(|_| ())
}
