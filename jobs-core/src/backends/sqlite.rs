//! SQLite: the operations of `jobs_sqlite::connection`.

use diesel::connection::LoadConnection;
use diesel::sqlite::Sqlite;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::{Inserted, JobRow, JobState, NewJob, Result};
use jobs_sqlite::connection;

use crate::backend::{JobsBackend, Sealed};

impl Sealed for Sqlite {}

impl JobsBackend for Sqlite {
    async fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: AsyncConnection<Backend = Sqlite>,
    {
        connection::insert_many(conn, jobs).await
    }

    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Sqlite>,
    {
        connection::insert_many_sync(conn, jobs)
    }

    async fn cancel<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        connection::cancel_many(conn, ids).await
    }

    async fn retry<C>(conn: &mut C, ids: &[i64]) -> Result<jobs_driver::Retried>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        connection::retry_many(conn, ids).await
    }

    async fn delete<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        connection::delete_many(conn, ids).await
    }

    async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        connection::set_paused(conn, queue, paused).await
    }

    async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        connection::get(conn, id).await
    }

    async fn migrate<C>(conn: C) -> Result<Vec<String>>
    where
        C: AsyncConnection<Backend = Sqlite> + 'static,
    {
        connection::migrate(conn).await
    }
}
