//! Where jobs can be inserted from: a connection of a supported backend (in the caller's
//! transaction, if any), a pool, or a driver.

use std::future::Future;
use std::sync::Arc;

use diesel_async::AsyncConnection;
use jobs_driver::{Driver, Inserted, JobInsertManyParams, NewJob};

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
}

/// In the caller's transaction, if the connection is in one: roll back, and the jobs
/// never existed.
impl<C> Enqueuer for &mut C
where
    C: AsyncConnection,
    C::Backend: JobsBackend,
{
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        Ok(<C::Backend as JobsBackend>::insert(self, jobs).await?)
    }
}

/// Through the driver: the insert commits by itself, and the driver wakes the workers.
/// (Generic over the object's lifetime, which is `'static` for every driver: written so,
/// the compiler can prove a future holding one `Send` for `tokio::spawn`.)
impl<'d> Enqueuer for &Arc<dyn Driver + 'd> {
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        Ok(self.job_insert_many(JobInsertManyParams { jobs, now: None }).await?)
    }
}

/// A pooled connection is not in a transaction: the insert commits by itself and returns.
/// Its wake-up is rationed per queue (`jobs_postgres::wakeups`): the first insert of a
/// window notifies from its own statement; later ones in the window get one trailing
/// wake-up at its end.
#[cfg(feature = "postgres")]
impl Enqueuer for &jobs_postgres::Pool {
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        Ok(jobs_postgres::wakeups::insert_through_pool(self, jobs, None).await?)
    }
}

/// Through a driver of this build: the insert commits by itself. On Postgres it notifies
/// as [`Enqueuer for &Pool`](Enqueuer#impl-Enqueuer-for-%26Pool) does; on SQLite and MySQL
/// this process's workers are woken at once, others' at their next read of
/// `job_notifications`.
macro_rules! through_driver {
    ($($feature:literal => $driver:ty),* $(,)?) => {$(
        #[cfg(feature = $feature)]
        impl Enqueuer for &$driver {
            async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
                Ok(self.job_insert_many(JobInsertManyParams { jobs, now: None }).await?)
            }
        }
    )*};
}

through_driver!(
    "postgres" => jobs_postgres::PgDriver,
    "sqlite" => jobs_sqlite::SqliteDriver,
    "mysql" => jobs_mysql::MysqlDriver,
);
