//! The insert path every async and sync enqueue takes: the rows, checked, through an
//! [`Enqueuer`] or a synchronous connection's driver, or through the task's
//! [`enqueue_through`] driver (inline mode).

use std::sync::Arc;

use jobs_driver::{ConnectionDriver, Driver, Inserted, JobInsertManyParams, NewJob};

use super::enqueuer::Enqueuer;
use crate::backend::JobsBackend;
use crate::error::{Error, Result};
use crate::middleware::InsertChain;

/// What enqueueing one job did: the job's id, and whether a job with the same uniqueness
/// key already existed (then nothing was inserted and `id` is that job's).
pub type Enqueued = Inserted;

/// The one result of a one-row insert.
pub(crate) fn first(mut inserted: Vec<Inserted>) -> Result<Enqueued> {
    inserted.pop().ok_or(Error::Database(diesel::result::Error::NotFound))
}

/// Anything that turns into a row to insert: an [`EnqueueRequest`](crate::EnqueueRequest) or a [`NewJob`].
pub trait IntoNewJob {
    /// The row.
    fn into_new_job(self) -> Result<NewJob>;
}

/// A row built by hand gets the checks a typed request gets ([`NewJob::validate`]; the
/// table itself only checks that finished jobs carry their finish time).
impl IntoNewJob for NewJob {
    fn into_new_job(self) -> Result<NewJob> {
        self.validate()?;
        Ok(self)
    }
}

/// Inserts many jobs, of one kind or several, in one statement. Results come back in the
/// order of the input.
pub async fn enqueue_many<E, I>(target: E, jobs: I) -> Result<Vec<Enqueued>>
where
    E: Enqueuer,
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    insert(target, new_jobs(jobs)?).await
}

/// The rows of `jobs`, validated; stops at the first invalid one. (Collecting into a
/// `Result` would start from an empty vector and grow it, moving the rows each time.)
fn new_jobs<I>(jobs: I) -> Result<Vec<NewJob>>
where
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    let jobs = jobs.into_iter();
    let mut rows = Vec::with_capacity(jobs.size_hint().0);
    for job in jobs {
        rows.push(job.into_new_job()?);
    }
    Ok(rows)
}

tokio::task_local! {
    /// The driver every async enqueue of the task inserts through instead of its target,
    /// when set ([`enqueue_through`]).
    static ENQUEUE_DRIVER: Arc<dyn Driver>;
}

/// Runs `body` with every async enqueue inside it (`J::enqueue`, `build(..).enqueue`,
/// [`enqueue_many`]) inserting through `driver`, whatever target it names. The seam inline
/// mode plugs into: its driver runs the jobs instead of storing them
/// (`testing::inline`).
#[cfg(feature = "testing")]
pub(crate) async fn enqueue_through<F: std::future::Future>(driver: Arc<dyn Driver>, body: F) -> F::Output {
    ENQUEUE_DRIVER.scope(driver, body).await
}

/// Inserts `rows` through `target`, or through the task's [`enqueue_through`] driver,
/// inside the process's insert middleware.
pub(crate) async fn insert<E: Enqueuer>(target: E, mut rows: Vec<NewJob>) -> Result<Vec<Enqueued>> {
    let mut chain = InsertChain::current();
    chain.before(rows.iter_mut())?;
    let inserted = chain
        .around(async {
            match ENQUEUE_DRIVER.try_with(Arc::clone) {
                Ok(driver) => {
                    Ok(driver.job_insert_many(JobInsertManyParams { jobs: &rows, now: None }).await?)
                }
                Err(_) => target.insert(&rows).await,
            }
        })
        .await?;
    chain.after(rows.iter().zip(&inserted));
    Ok(inserted)
}

/// [`enqueue_many`] on a synchronous diesel connection of a supported backend.
pub fn enqueue_many_sync<C, I>(conn: &mut C, jobs: I) -> Result<Vec<Enqueued>>
where
    C: diesel::connection::LoadConnection,
    C::Backend: JobsBackend,
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    insert_sync(conn, new_jobs(jobs)?)
}

/// Inserts `rows` on a synchronous connection, inside the process's insert middleware.
pub(crate) fn insert_sync<C>(conn: &mut C, mut rows: Vec<NewJob>) -> Result<Vec<Enqueued>>
where
    C: diesel::connection::LoadConnection,
    C::Backend: JobsBackend,
{
    let mut chain = InsertChain::current();
    chain.before(rows.iter_mut())?;
    let inserted = chain.around_sync(|| {
        <<C::Backend as JobsBackend>::Driver as ConnectionDriver>::insert_sync(conn, &rows)
    })?;
    chain.after(rows.iter().zip(&inserted));
    Ok(inserted)
}
