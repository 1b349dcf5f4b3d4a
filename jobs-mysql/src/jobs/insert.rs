//! Inserting jobs: one multi-row `INSERT … VALUES` per [`ROWS_PER_STATEMENT`] jobs, in
//! input order, in whatever transaction the connection is in (where the rows are read
//! back, in one of their own if it is in none); then one
//! `job_notifications` row per queue that received available jobs (see `notifications`).
//! The batch and its statements are built in `insert_batch` (their text, one per shape of
//! rows, in `insert_sql`). On MariaDB the statements return their rows; on MySQL, and on
//! sync connections, `insert_read_back` reads them back (see `returning`).
//!
//! A job that holds a uniqueness key goes in with `ON DUPLICATE KEY UPDATE` on
//! `jobs_unique_idx` (the generated column that holds the key only in the job's unique
//! states): MariaDB then returns the row that holds the key. Every new row of such a
//! statement carries the statement's token in `lock_token`, so a returned row with another
//! token is an existing job (seed 002's de-duplicated insert).

use diesel::mysql::Mysql;
use diesel_async::{AsyncConnection, AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Inserted, NewJob, Notification, Result};

use super::insert_batch::{InsertedRow, Outcome, Prepared, Statement, prepare, query, results};
use super::insert_read_back;
pub(crate) use super::insert_sql::ROWS_PER_STATEMENT;
use super::insert_sql::RowShape;
use crate::rows::Id;
use crate::{notifications, returning};

/// Runs `statement` of `prepared` on `conn`, returning its rows' outcomes in input order.
async fn run<C>(conn: &mut C, prepared: &Prepared<'_>, statement: &Statement) -> Result<Vec<Outcome>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let query = query(prepared, statement);
    Ok(if statement.shape == RowShape::Plain {
        query.load::<Id>(conn).await?.into_iter().map(|row| Outcome::new_available(row.id)).collect()
    } else {
        let rows = query.load::<InsertedRow>(conn).await?;
        rows.into_iter().map(|row| Outcome::of(row, prepared.token)).collect()
    })
}

/// Inserts `jobs` on `conn` (the driver's, or an application's in its transaction), one
/// statement per [`ROWS_PER_STATEMENT`], then adds the wake-ups' rows. Returns each
/// input's result and the wake-ups.
pub(crate) async fn insert_many<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnection<Backend = Mysql>,
{
    insert(conn, jobs, now, true).await
}

/// [`insert_many`] without the wake-ups' rows: the caller sees to them (on MariaDB, a
/// batch of at most [`ROWS_PER_STATEMENT`] is then one statement, which commits by itself).
pub(crate) async fn insert_rows<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnection<Backend = Mysql>,
{
    insert(conn, jobs, now, false).await
}

/// [`insert_many`], with the wake-ups' rows only when `wake_ups`.
async fn insert<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<chrono::DateTime<chrono::Utc>>,
    wake_ups: bool,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnection<Backend = Mysql>,
{
    if jobs.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let returning = returning::insert_returning(conn).await?;
    let prepared = prepare(jobs, now, returning);
    if !returning {
        return insert_read_back::insert(conn, &prepared, wake_ups).await;
    }
    let mut returned = Vec::with_capacity(prepared.batch.rows.len());
    for statement in &prepared.statements {
        returned.extend(run(conn, &prepared, statement).await?);
    }
    let (inserted, told) = results(&prepared, returned)?;
    if wake_ups {
        for wake_up in &told {
            notifications::add(conn, wake_up).await?;
        }
    }
    Ok((inserted, told))
}

/// [`insert_many`] on a synchronous diesel connection (`MysqlConnection`, pooled or not):
/// always read back (the C client cannot read `INSERT … RETURNING` through a prepared
/// statement).
pub(crate) fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    insert_read_back::insert_sync(conn, &prepare(jobs, None, false))
}
