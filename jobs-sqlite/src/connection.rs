//! [`ConnectionDriver`] for SQLite: the operations an application runs on a connection of
//! its own, so that they commit or roll back with its transaction (insert jobs, async or
//! sync; cancel, retry or delete jobs; pause or resume a queue; read a job), and the URLs
//! that open a [`SqliteDriver`]. Their notifications are rows of `job_notifications`
//! written in the same transaction, so every worker learns of them once it commits (within
//! `SqliteDriver::notification_poll`).

use diesel::connection::LoadConnection;
use diesel::sqlite::Sqlite;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::{
    BatchChange, BatchChanged, ConnectionDriver, Inserted, InsertedWorkflow, JobRow, JobState, NewJob,
    NewWorkflow, Result, Retried, begin_own_transaction, end_own_transaction,
};

use crate::SqliteDriver;
use crate::jobs::{control, insert, read};
use crate::time::now_ms;

impl ConnectionDriver for SqliteDriver {
    type Backend = Sqlite;
    // `sqlite:app.db` and `file:app.db` name SQLite files as `sqlite://app.db` does.
    const URL_SCHEMES: &'static [&'static str] = &["sqlite", "file"];
    const URL_EXAMPLE: &'static str = "sqlite://path/to/file.db (or sqlite:file.db)";

    fn open(url: &str, max_connections: usize) -> Result<SqliteDriver> {
        SqliteDriver::open(url, max_connections)
    }

    async fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: AsyncConnection<Backend = Sqlite>,
    {
        Ok(insert::insert_many_async(conn, jobs, now_ms(None)).await?.0)
    }

    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Sqlite>,
    {
        insert::insert_many_sync(conn, jobs, now_ms(None)).map(|(inserted, _)| inserted)
    }

    async fn cancel<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        Ok(control::cancel_many(conn, ids, now_ms(None)).await?.0)
    }

    async fn retry<C>(conn: &mut C, ids: &[i64]) -> Result<Retried>
    where
        C: AsyncConnection<Backend = Sqlite>,
    {
        let own = begin_own_transaction(conn).await?;
        let outcome = crate::workflows::retry_and_reopen(conn, ids, now_ms(None)).await.map(|(r, _)| r);
        end_own_transaction(conn, own, outcome).await
    }

    async fn insert_workflow<C>(conn: &mut C, workflow: &NewWorkflow) -> Result<InsertedWorkflow>
    where
        C: AsyncConnection<Backend = Sqlite>,
    {
        let own = begin_own_transaction(conn).await?;
        let mut store = crate::workflows::SqliteStore::new(&mut *conn, now_ms(None));
        let outcome = jobs_driver::workflow::insert_workflow(&mut store, workflow, None).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn change_batch<C>(conn: &mut C, change: &BatchChange) -> Result<BatchChanged>
    where
        C: AsyncConnection<Backend = Sqlite>,
    {
        let own = begin_own_transaction(conn).await?;
        let mut store = crate::workflows::SqliteStore::new(&mut *conn, now_ms(None));
        let outcome = jobs_driver::workflow::change_batch(&mut store, change, None).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn delete<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        crate::workflows::delete_and_forget(conn, ids).await
    }

    async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        crate::queues::set_paused(conn, queue, paused, now_ms(None)).await.map(|_| ())
    }

    async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
    where
        C: AsyncConnectionCore<Backend = Sqlite> + Send,
    {
        read::get_async(conn, id).await
    }

    async fn migrate<C>(conn: C) -> Result<Vec<String>>
    where
        C: AsyncConnection<Backend = Sqlite> + 'static,
    {
        crate::migrate::migrate(conn).await
    }
}
