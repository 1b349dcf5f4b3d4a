//! An application's own transaction on a case's database: a connection of the backend's
//! own type (not the driver's), async or sync, in a transaction the case commits or rolls
//! back, through which it enqueues and controls jobs as an application does (the
//! backend's `ConnectionDriver`, reached through `JobsBackend`: the path of
//! `send_welcome::enqueue(&mut tx, …)` and `enqueue_sync`), and runs its own statements.
//!
//! A backend's start-up opens the connection ([`begin`], [`begin_sync`]); the suite names
//! no backend.

use async_trait::async_trait;
use diesel::connection::{LoadConnection, TransactionManager as SyncTransactionManager};
use diesel_async::{AsyncConnection, TransactionManager};
use jobs_core::driver::{
    BatchChange, BatchChanged, ConnectionDriver, Inserted, InsertedWorkflow, JobRow, JobState, NewJob,
    NewWorkflow, Retried,
};
use jobs_core::{Error, JobsBackend};

/// The driver of diesel backend `B`.
type DriverOf<B> = <B as JobsBackend>::Driver;

/// A transaction on an async connection of the application's, open until committed or
/// rolled back (dropped, the connection closes and the database rolls it back).
#[async_trait]
pub trait AppTransaction: Send {
    /// Enqueues `jobs` inside the transaction.
    async fn insert(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>, Error>;
    /// Enqueues `jobs` inside the transaction as the application does
    /// (`jobs_core::enqueue_many`: the process's insert middleware runs).
    async fn enqueue(&mut self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>, Error>;
    /// Inserts a workflow inside the transaction.
    async fn insert_workflow(&mut self, workflow: &NewWorkflow) -> Result<InsertedWorkflow, Error>;
    /// Opens, fills or seals a batch inside the transaction.
    async fn change_batch(&mut self, change: &BatchChange) -> Result<BatchChanged, Error>;
    /// Cancels `ids` inside the transaction; the state each changed job is now in.
    async fn cancel(&mut self, ids: &[i64]) -> Result<Vec<JobState>, Error>;
    /// Retries `ids` inside the transaction.
    async fn retry(&mut self, ids: &[i64]) -> Result<Retried, Error>;
    /// Deletes `ids` inside the transaction; how many went.
    async fn delete(&mut self, ids: &[i64]) -> Result<i64, Error>;
    /// Reads job `id` inside the transaction.
    async fn get(&mut self, id: i64) -> Result<Option<JobRow>, Error>;
    /// Pauses or resumes `queue` inside the transaction.
    async fn set_paused(&mut self, queue: &str, paused: bool) -> Result<(), Error>;
    /// Runs statements inside the transaction.
    async fn execute(&mut self, sql: &str) -> Result<(), Error>;
    /// Opens a savepoint (a nested transaction).
    async fn savepoint(&mut self) -> Result<(), Error>;
    /// Releases the innermost savepoint: its work joins the transaction.
    async fn release_savepoint(&mut self) -> Result<(), Error>;
    /// Rolls back to the innermost savepoint; the transaction goes on as it was before it.
    async fn rollback_to_savepoint(&mut self) -> Result<(), Error>;
    /// Commits.
    async fn commit(self: Box<Self>) -> Result<(), Error>;
    /// Rolls back.
    async fn rollback(self: Box<Self>) -> Result<(), Error>;
}

/// [`AppTransaction`] on any diesel-async connection whose backend the framework knows.
struct Open<C>(C);

/// Begins a transaction on `conn`.
pub async fn begin<C>(mut conn: C) -> Result<Box<dyn AppTransaction>, Error>
where
    C: AsyncConnection + Send + 'static,
    C::Backend: JobsBackend,
{
    C::TransactionManager::begin_transaction(&mut conn).await?;
    Ok(Box::new(Open(conn)))
}

#[async_trait]
impl<C> AppTransaction for Open<C>
where
    C: AsyncConnection + Send + 'static,
    C::Backend: JobsBackend,
{
    async fn insert(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::insert(&mut self.0, jobs).await?)
    }

    async fn enqueue(&mut self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>, Error> {
        jobs_core::enqueue_many(&mut self.0, jobs).await
    }

    async fn insert_workflow(&mut self, workflow: &NewWorkflow) -> Result<InsertedWorkflow, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::insert_workflow(&mut self.0, workflow).await?)
    }

    async fn change_batch(&mut self, change: &BatchChange) -> Result<BatchChanged, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::change_batch(&mut self.0, change).await?)
    }

    async fn cancel(&mut self, ids: &[i64]) -> Result<Vec<JobState>, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::cancel(&mut self.0, ids).await?)
    }

    async fn retry(&mut self, ids: &[i64]) -> Result<Retried, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::retry(&mut self.0, ids).await?)
    }

    async fn delete(&mut self, ids: &[i64]) -> Result<i64, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::delete(&mut self.0, ids).await?)
    }

    async fn get(&mut self, id: i64) -> Result<Option<JobRow>, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::get(&mut self.0, id).await?)
    }

    async fn set_paused(&mut self, queue: &str, paused: bool) -> Result<(), Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::set_paused(&mut self.0, queue, paused).await?)
    }

    async fn execute(&mut self, sql: &str) -> Result<(), Error> {
        Ok(self.0.batch_execute(sql).await?)
    }

    async fn savepoint(&mut self) -> Result<(), Error> {
        Ok(C::TransactionManager::begin_transaction(&mut self.0).await?)
    }

    async fn release_savepoint(&mut self) -> Result<(), Error> {
        Ok(C::TransactionManager::commit_transaction(&mut self.0).await?)
    }

    async fn rollback_to_savepoint(&mut self) -> Result<(), Error> {
        Ok(C::TransactionManager::rollback_transaction(&mut self.0).await?)
    }

    async fn commit(mut self: Box<Self>) -> Result<(), Error> {
        Ok(C::TransactionManager::commit_transaction(&mut self.0).await?)
    }

    async fn rollback(mut self: Box<Self>) -> Result<(), Error> {
        Ok(C::TransactionManager::rollback_transaction(&mut self.0).await?)
    }
}

/// A transaction on a synchronous diesel connection of the application's (`enqueue_sync`'s
/// path): the same operations as [`AppTransaction`], blocking.
pub trait SyncAppTransaction: Send {
    /// Enqueues `jobs` inside the transaction.
    fn insert(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>, Error>;
    /// Enqueues `jobs` inside the transaction as the application does
    /// (`jobs_core::enqueue_many_sync`: the process's insert middleware runs).
    fn enqueue(&mut self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>, Error>;
    /// Runs statements inside the transaction.
    fn execute(&mut self, sql: &str) -> Result<(), Error>;
    /// Opens a savepoint (a nested transaction).
    fn savepoint(&mut self) -> Result<(), Error>;
    /// Releases the innermost savepoint: its work joins the transaction.
    fn release_savepoint(&mut self) -> Result<(), Error>;
    /// Rolls back to the innermost savepoint; the transaction goes on as it was before it.
    fn rollback_to_savepoint(&mut self) -> Result<(), Error>;
    /// Commits.
    fn commit(self: Box<Self>) -> Result<(), Error>;
    /// Rolls back.
    fn rollback(self: Box<Self>) -> Result<(), Error>;
}

/// [`SyncAppTransaction`] on any sync diesel connection whose backend the framework knows.
struct OpenSync<C>(C);

/// Begins a transaction on the synchronous `conn`.
pub fn begin_sync<C>(mut conn: C) -> Result<Box<dyn SyncAppTransaction>, Error>
where
    C: LoadConnection + Send + 'static,
    C::Backend: JobsBackend,
{
    C::TransactionManager::begin_transaction(&mut conn)?;
    Ok(Box::new(OpenSync(conn)))
}

impl<C> SyncAppTransaction for OpenSync<C>
where
    C: LoadConnection + Send + 'static,
    C::Backend: JobsBackend,
{
    fn insert(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>, Error> {
        Ok(<DriverOf<C::Backend> as ConnectionDriver>::insert_sync(&mut self.0, jobs)?)
    }

    fn enqueue(&mut self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>, Error> {
        jobs_core::enqueue_many_sync(&mut self.0, jobs)
    }

    fn execute(&mut self, sql: &str) -> Result<(), Error> {
        Ok(self.0.batch_execute(sql)?)
    }

    fn savepoint(&mut self) -> Result<(), Error> {
        Ok(C::TransactionManager::begin_transaction(&mut self.0)?)
    }

    fn release_savepoint(&mut self) -> Result<(), Error> {
        Ok(C::TransactionManager::commit_transaction(&mut self.0)?)
    }

    fn rollback_to_savepoint(&mut self) -> Result<(), Error> {
        Ok(C::TransactionManager::rollback_transaction(&mut self.0)?)
    }

    fn commit(mut self: Box<Self>) -> Result<(), Error> {
        Ok(C::TransactionManager::commit_transaction(&mut self.0)?)
    }

    fn rollback(mut self: Box<Self>) -> Result<(), Error> {
        Ok(C::TransactionManager::rollback_transaction(&mut self.0)?)
    }
}

/// What a backend gives [`TestDb::new`](crate::TestDb::new) as `begin`: opens a connection of the
/// application's and begins a transaction on it.
pub type Begin = Box<dyn Fn() -> futures::future::BoxFuture<'static, Box<dyn AppTransaction>> + Send + Sync>;

/// What a backend gives [`TestDb::new`](crate::TestDb::new) as `begin_sync`: the same on a
/// synchronous connection.
pub type BeginSync = Box<dyn Fn() -> Box<dyn SyncAppTransaction> + Send + Sync>;

/// A [`Begin`] that opens each connection with `open(url)` and begins a transaction on it:
/// for a backend whose application connections need more than `establish` (a set-up
/// statement, a pooler's settings).
pub fn begin_with<C, F, Fut>(url: impl Into<String>, open: F) -> Begin
where
    C: AsyncConnection + Send + 'static,
    C::Backend: JobsBackend,
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<C, Error>> + Send + 'static,
{
    let url = url.into();
    let open = std::sync::Arc::new(open);
    Box::new(move || {
        let (url, open) = (url.clone(), open.clone());
        Box::pin(async move {
            let conn = open(url).await.expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// A [`Begin`] on new connections of type `C` to `url` (`AsyncConnection::establish`),
/// as an application opens them.
pub fn connecting<C>(url: impl Into<String>) -> Begin
where
    C: AsyncConnection + Send + 'static,
    C::Backend: JobsBackend,
{
    begin_with(url, |url| async move { Ok(C::establish(&url).await?) })
}

/// A [`BeginSync`] that opens each connection with `open(url)`.
pub fn begin_sync_with<C, F>(url: impl Into<String>, open: F) -> BeginSync
where
    C: LoadConnection + Send + 'static,
    C::Backend: JobsBackend,
    F: Fn(&str) -> Result<C, Error> + Send + Sync + 'static,
{
    let url = url.into();
    Box::new(move || {
        let conn = open(&url).expect("an application connection");
        begin_sync(conn).expect("begin")
    })
}

/// A [`BeginSync`] on new synchronous connections of type `C` to `url`
/// (`diesel::Connection::establish`).
pub fn connecting_sync<C>(url: impl Into<String>) -> BeginSync
where
    C: LoadConnection + Send + 'static,
    C::Backend: JobsBackend,
{
    begin_sync_with(url, |url| Ok(C::establish(url)?))
}
