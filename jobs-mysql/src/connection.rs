//! Operations on a connection of the application's own, so that they commit or roll back
//! with its transaction: insert jobs (async or sync diesel), cancel, retry or delete jobs,
//! pause or resume a queue, read a job. Their notifications are rows of
//! `job_notifications` written in the same transaction, so every worker learns of them
//! once it commits (within `MysqlDriver::notification_poll`). `jobs-core` calls these for
//! `Enqueuer for &mut C`, `enqueue_sync`, `cancel_job`, `retry_job`, `delete_job` and
//! `set_queue_paused` on MySQL connections.

use diesel::connection::LoadConnection;
use diesel::mysql::Mysql;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::{Inserted, JobState, NewJob, Result};

use crate::jobs::{control, insert};

pub use crate::jobs::read::get;
pub use crate::migrate::migrate;

/// Inserts `jobs` (validated) in `conn`'s transaction, in input order; a job whose
/// uniqueness key is held comes back as the existing job. A batch of more than 100 jobs
/// takes one statement per 100: all-or-nothing inside a transaction, as enqueueing with
/// business writes is. On a connection in autocommit mode, each 100 commit on their own
/// on MariaDB; on MySQL, which reads the rows back, the batch takes a transaction of its
/// own.
pub async fn insert_many<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: AsyncConnection<Backend = Mysql>,
{
    Ok(insert::insert_many(conn, jobs, None).await?.0)
}

/// [`insert_many`] on a synchronous diesel connection (`MysqlConnection`, pooled or not).
pub fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: LoadConnection<Backend = Mysql>,
{
    insert::insert_many_sync(conn, jobs)
}

/// Cancels the jobs of `ids` that are not finished (see `jobs_driver::JobCancelManyParams`).
pub async fn cancel_many<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    Ok(control::cancel_many(conn, ids).await?.0)
}

/// Makes the jobs of `ids` that are not running available now, but those whose uniqueness
/// key another job holds (see `jobs_driver::Retried`).
pub async fn retry_many<C>(conn: &mut C, ids: &[i64]) -> Result<jobs_driver::Retried>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    Ok(control::retry_many(conn, ids).await?.0)
}

/// Deletes the jobs of `ids` that are not running.
pub async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    control::delete_many(conn, ids).await
}

/// Pauses (`true`) or resumes (`false`) `queue` on every node.
pub async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    crate::queues::set_paused(conn, queue, paused).await.map(|_| ())
}
