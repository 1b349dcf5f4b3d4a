//! [`ConnectionDriver`] for MariaDB and MySQL: the operations an application runs on a
//! connection of its own, so that they commit or roll back with its transaction (insert
//! jobs, async or sync; cancel, retry or delete jobs; pause or resume a queue; read a
//! job), and the URLs that open a [`MysqlDriver`]. Their notifications are rows of
//! `job_notifications` written in the same transaction, so every worker learns of them
//! once it commits (within `MysqlDriver::notification_poll`).

use diesel::connection::LoadConnection;
use diesel::mysql::Mysql;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::{
    BatchChange, BatchChanged, ConnectionDriver, Inserted, InsertedWorkflow, JobRow, JobState, NewJob,
    NewWorkflow, Result, Retried, begin_own_transaction, end_own_transaction,
};

use crate::MysqlDriver;
use crate::jobs::{control, insert, read};

impl ConnectionDriver for MysqlDriver {
    type Backend = Mysql;
    const URL_SCHEMES: &'static [&'static str] = &["mysql", "mariadb"];
    const URL_EXAMPLE: &'static str = "mysql://user:password@host:3306/database (or mariadb://)";

    fn open(url: &str, max_connections: usize) -> Result<MysqlDriver> {
        MysqlDriver::open(&url.replacen("mariadb://", "mysql://", 1), max_connections)
    }

    /// A batch of more than 100 jobs takes one statement per 100: all-or-nothing inside a
    /// transaction, as enqueueing with business writes is. On a connection in autocommit
    /// mode, each 100 commit on their own on MariaDB; on MySQL, which reads the rows back,
    /// the batch takes a transaction of its own.
    async fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: AsyncConnection<Backend = Mysql>,
    {
        Ok(insert::insert_many(conn, jobs, None).await?.0)
    }

    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Mysql>,
    {
        insert::insert_many_sync(conn, jobs)
    }

    async fn cancel<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        Ok(control::cancel_many(conn, ids).await?.0)
    }

    async fn retry<C>(conn: &mut C, ids: &[i64]) -> Result<Retried>
    where
        C: AsyncConnection<Backend = Mysql>,
    {
        let own = begin_own_transaction(conn).await?;
        let outcome = crate::workflows::retry_and_reopen(conn, ids).await.map(|(r, _)| r);
        end_own_transaction(conn, own, outcome).await
    }

    async fn insert_workflow<C>(conn: &mut C, workflow: &NewWorkflow) -> Result<InsertedWorkflow>
    where
        C: AsyncConnection<Backend = Mysql>,
    {
        let own = begin_own_transaction(conn).await?;
        let mut store = crate::workflows::MysqlStore::new(&mut *conn);
        let outcome = jobs_driver::workflow::insert_workflow(&mut store, workflow, None).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn change_batch<C>(conn: &mut C, change: &BatchChange) -> Result<BatchChanged>
    where
        C: AsyncConnection<Backend = Mysql>,
    {
        let own = begin_own_transaction(conn).await?;
        let mut store = crate::workflows::MysqlStore::new(&mut *conn);
        let outcome = jobs_driver::workflow::change_batch(&mut store, change, None).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn delete<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        crate::workflows::delete_and_forget(conn, ids).await
    }

    async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        crate::queues::set_paused(conn, queue, paused).await.map(|_| ())
    }

    async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
    where
        C: AsyncConnectionCore<Backend = Mysql> + Send,
    {
        read::get(conn, id).await
    }

    async fn migrate<C>(conn: C) -> Result<Vec<String>>
    where
        C: AsyncConnection<Backend = Mysql> + 'static,
    {
        crate::migrate::migrate(conn).await
    }
}
