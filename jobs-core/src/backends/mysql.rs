//! MySQL and MariaDB: the operations of `jobs_mysql::connection`.

use diesel::connection::LoadConnection;
use diesel::mysql::Mysql;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::{Inserted, JobRow, JobState, NewJob, Result};
use jobs_mysql::connection;

use crate::backend::{JobsBackend, Sealed};

impl Sealed for Mysql {}

impl JobsBackend for Mysql {
    async fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: AsyncConnection<Backend = Mysql>,
    {
        connection::insert_many(conn, jobs).await
    }

    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Mysql>,
    {
        connection::insert_many_sync(conn, jobs)
    }

    async fn cancel<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        connection::cancel_many(conn, ids).await
    }

    async fn retry<C>(conn: &mut C, ids: &[i64]) -> Result<jobs_driver::Retried>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        connection::retry_many(conn, ids).await
    }

    async fn delete<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        connection::delete_many(conn, ids).await
    }

    async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        connection::set_paused(conn, queue, paused).await
    }

    async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        connection::get(conn, id).await
    }

    async fn migrate<C>(conn: C) -> Result<Vec<String>>
    where
        C: AsyncConnection<Backend = Mysql> + 'static,
    {
        connection::migrate(conn).await
    }
}
