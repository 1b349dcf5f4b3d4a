//! Where jobs can be inserted from: a connection of a supported backend (in the caller's
//! transaction, if any), a pool, or a driver.

use jobs_driver::ConnectionDriver;
use std::future::Future;
use std::sync::Arc;

use diesel_async::AsyncConnection;
use jobs_driver::{
    BatchChange, BatchChanged, Driver, Inserted, InsertedWorkflow, JobBatchParams, JobInsertManyParams,
    JobInsertWorkflowParams, NewJob, NewWorkflow,
};

use crate::backend::JobsBackend;
use crate::error::Result;

/// Where jobs can be inserted from async code: a connection of a supported backend
/// (`&mut AsyncPgConnection`, `&mut AsyncMysqlConnection`, SQLite's
/// `&mut SyncConnectionWrapper<SqliteConnection>`, in a transaction or not; a pooled
/// connection), a Postgres pool
/// (`&Pool`), or a driver (`&PgDriver`, `&SqliteDriver`, `&MysqlDriver`, `&Arc<dyn Driver>`).
pub trait Enqueuer: Send {
    /// Inserts the jobs in one statement.
    fn insert(self, jobs: &[NewJob]) -> impl Future<Output = Result<Vec<Inserted>>> + Send;

    /// Inserts a workflow: its steps and their dependencies, in one transaction (the
    /// caller's, for a connection inside one).
    fn insert_workflow(self, workflow: &NewWorkflow)
    -> impl Future<Output = Result<InsertedWorkflow>> + Send;

    /// Opens a batch, adds members to one, or seals it, in one transaction (the caller's,
    /// for a connection inside one).
    fn change_batch(self, change: &BatchChange) -> impl Future<Output = Result<BatchChanged>> + Send;
}

/// In the caller's transaction, if the connection is in one: roll back, and the jobs
/// never existed.
impl<C> Enqueuer for &mut C
where
    C: AsyncConnection,
    C::Backend: JobsBackend,
{
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::insert(self, jobs).await?)
    }

    async fn insert_workflow(self, workflow: &NewWorkflow) -> Result<InsertedWorkflow> {
        Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::insert_workflow(self, workflow).await?)
    }

    async fn change_batch(self, change: &BatchChange) -> Result<BatchChanged> {
        Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::change_batch(self, change).await?)
    }
}

/// Through the driver: the insert commits by itself, and the driver wakes the workers.
/// (Generic over the object's lifetime, which is `'static` for every driver: written so,
/// the compiler can prove a future holding one `Send` for `tokio::spawn`.)
impl<'d> Enqueuer for &Arc<dyn Driver + 'd> {
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        Ok(self.job_insert_many(JobInsertManyParams { jobs, now: None }).await?)
    }

    async fn insert_workflow(self, workflow: &NewWorkflow) -> Result<InsertedWorkflow> {
        Ok(self.job_insert_workflow(JobInsertWorkflowParams { workflow, now: None }).await?)
    }

    async fn change_batch(self, change: &BatchChange) -> Result<BatchChanged> {
        Ok(self.job_batch(JobBatchParams { change, now: None }).await?)
    }
}
