//! An application's own transaction on a case's database: a connection of the backend's
//! own type (not the driver's), in a transaction the case commits or rolls back, through
//! which it enqueues as an application does (`JobsBackend::Driver`'s `ConnectionDriver::insert`, the path of
//! `send_welcome::enqueue(&mut tx, …)`) and runs its own statements.

use async_trait::async_trait;
use diesel_async::{AsyncConnection, TransactionManager};
use jobs_core::driver::{Inserted, NewJob};
use jobs_core::{Error, JobsBackend};

/// A transaction on a connection of the application's, open until committed or rolled
/// back (dropped, the connection closes and the database rolls it back).
#[async_trait]
pub trait AppTransaction: Send {
    /// Enqueues `jobs` inside the transaction.
    async fn insert(&mut self, jobs: &[NewJob]) -> Result<Vec<Inserted>, Error>;
    /// Runs statements inside the transaction.
    async fn execute(&mut self, sql: &str) -> Result<(), Error>;
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
        Ok(<<C::Backend as JobsBackend>::Driver as jobs_core::driver::ConnectionDriver>::insert(
            &mut self.0,
            jobs,
        )
        .await?)
    }

    async fn execute(&mut self, sql: &str) -> Result<(), Error> {
        Ok(self.0.batch_execute(sql).await?)
    }

    async fn commit(mut self: Box<Self>) -> Result<(), Error> {
        Ok(C::TransactionManager::commit_transaction(&mut self.0).await?)
    }

    async fn rollback(mut self: Box<Self>) -> Result<(), Error> {
        Ok(C::TransactionManager::rollback_transaction(&mut self.0).await?)
    }
}

/// What a backend's [`TestDb::begin`](super::TestDb::begin) is.
pub type Begin = Box<dyn Fn() -> futures::future::BoxFuture<'static, Box<dyn AppTransaction>> + Send + Sync>;

/// Transactions on `AsyncPgConnection`s to `url`.
pub fn postgres(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn =
                diesel_async::AsyncPgConnection::establish(&url).await.expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// Transactions on the async SQLite connections of `url`.
pub fn sqlite(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn = jobs_core::sqlite::connect(&url).await.expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}

/// Transactions on `AsyncMysqlConnection`s to `url`.
pub fn mysql(url: String) -> Begin {
    Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            let conn =
                diesel_async::AsyncMysqlConnection::establish(&url).await.expect("an application connection");
            begin(conn).await.expect("begin")
        })
    })
}
