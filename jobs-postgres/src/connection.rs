//! [`ConnectionDriver`] for Postgres: the operations an application runs on a connection
//! of its own, so that they commit or roll back with its transaction (insert jobs, async
//! or sync; cancel, retry or delete jobs; pause or resume a queue; read a job), and the
//! URLs that open a [`PgDriver`]. Their notifications are `NOTIFY`s, which Postgres sends
//! when the transaction commits.

use diesel::connection::LoadConnection;
use diesel::pg::Pg;
use diesel_async::{AsyncConnection, AsyncConnectionCore};
use jobs_driver::workflow;
use jobs_driver::{
    BatchChange, BatchChanged, ConnectionDriver, Inserted, InsertedWorkflow, JobRow, JobState, NewJob,
    NewWorkflow, Result, Retried, begin_own_transaction, end_own_transaction,
};

use crate::PgDriver;
use crate::jobs::{control, insert, read};

/// Inserts `jobs` at `now` (the database's clock when `None`): [`ConnectionDriver::insert`]
/// with a time of the caller's, for tests that place jobs in the past.
pub use crate::jobs::insert::insert_many;

impl ConnectionDriver for PgDriver {
    type Backend = Pg;
    const URL_SCHEMES: &'static [&'static str] = &["postgres", "postgresql"];
    const URL_EXAMPLE: &'static str = "postgres://user:password@host:5432/database";

    fn open(url: &str, max_connections: usize) -> Result<PgDriver> {
        Ok(PgDriver::new(crate::pool(url, max_connections)?))
    }

    async fn insert<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: AsyncConnection<Backend = Pg>,
    {
        insert::insert_many(conn, jobs, None).await
    }

    fn insert_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
    where
        C: LoadConnection<Backend = Pg>,
    {
        insert::insert_many_sync(conn, jobs, None)
    }

    async fn cancel<C>(conn: &mut C, ids: &[i64]) -> Result<Vec<JobState>>
    where
        C: AsyncConnectionCore<Backend = Pg> + Send,
    {
        control::cancel_many(conn, ids).await
    }

    async fn retry<C>(conn: &mut C, ids: &[i64]) -> Result<Retried>
    where
        C: AsyncConnection<Backend = Pg>,
    {
        let own = begin_own_transaction(conn).await?;
        let outcome = crate::workflows::retry_and_reopen(conn, ids).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn insert_workflow<C>(conn: &mut C, workflow: &NewWorkflow) -> Result<InsertedWorkflow>
    where
        C: AsyncConnection<Backend = Pg>,
    {
        let own = begin_own_transaction(conn).await?;
        let outcome = workflow::insert_workflow(&mut crate::workflows::PgStore(conn), workflow, None).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn change_batch<C>(conn: &mut C, change: &BatchChange) -> Result<BatchChanged>
    where
        C: AsyncConnection<Backend = Pg>,
    {
        let own = begin_own_transaction(conn).await?;
        let outcome = workflow::change_batch(&mut crate::workflows::PgStore(conn), change, None).await;
        end_own_transaction(conn, own, outcome).await
    }

    async fn delete<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
    where
        C: AsyncConnectionCore<Backend = Pg> + Send,
    {
        crate::workflows::delete_and_forget(conn, ids).await
    }

    async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
    where
        C: AsyncConnectionCore<Backend = Pg> + Send,
    {
        crate::queues::set_paused(conn, queue, paused).await
    }

    async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
    where
        C: AsyncConnectionCore<Backend = Pg> + Send,
    {
        read::get(conn, id).await
    }

    async fn migrate<C>(conn: C) -> Result<Vec<String>>
    where
        C: AsyncConnection<Backend = Pg> + 'static,
    {
        crate::migrate(conn).await
    }
}
