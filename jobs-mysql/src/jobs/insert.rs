//! Inserting jobs: one multi-row `INSERT … VALUES` per [`ROWS_PER_STATEMENT`] jobs, in
//! input order, in whatever transaction the connection is in (where the rows are read
//! back, in one of their own if it is in none); then one
//! `job_notifications` row per queue that received available jobs (see `notifications`).
//! The batch and its statements are built in `insert_batch` (their text, one per shape of
//! rows, in `insert_sql`). On MariaDB the statements return their rows; on MySQL, and on
//! sync connections, `insert_read_back` reads them back (see `returning`).
//!
//! A job due now whose key is unique when available is first looked up: a job that holds
//! its key, as the connection sees it, is its answer ([`visible_holders`], a plain read
//! that locks nothing, so that a duplicate enqueued in a transaction that stays open never
//! holds up a running holder's completion). In a `REPEATABLE READ` transaction (MySQL's
//! default; the driver's own connections use `READ COMMITTED`) the look-up reads the
//! transaction's snapshot: a holder that finished since it began still counts as holding
//! the key (a locking read would see it finished, but would hold up the running holder's
//! completion until the transaction ends, which is worse). The others go in with `ON DUPLICATE KEY UPDATE` on
//! `jobs_unique_idx` (the generated column that holds the key only in the job's unique
//! states): should a holder have appeared since the look-up, MariaDB returns the row that
//! holds the key. Every new row of such a statement carries the statement's token in
//! `lock_token`, so a returned row with another token is an existing job (seed 002's
//! de-duplicated insert). (That late holder is locked until the caller's transaction ends,
//! as InnoDB locks any duplicate it meets.)

use std::collections::HashMap;

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Text, Varbinary};
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

/// A job holding a uniqueness key.
#[derive(QueryableByName)]
struct Holder {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Varbinary)]
    unique_held: Vec<u8>,
}

// The jobs holding the keys of `$1` (a JSON array of keys in hex), found through the
// unique index; a plain read, which locks nothing.
const HOLDERS: &str = "\
SELECT j.id, j.unique_held
FROM JSON_TABLE($1, '$[*]' COLUMNS (k VARCHAR(200) PATH '$')) AS t
STRAIGHT_JOIN jobs j ON j.unique_held = UNHEX(t.k)";

/// The key of `job` when the look-up decides for it: the job is due now (it goes in
/// `available`) and its key is unique there. (A job due later goes in `scheduled`, which
/// its key may not be unique in: the insert decides for it.)
fn looked_up_key(job: &NewJob) -> Option<&[u8]> {
    let due_now = job.run_at.is_none_or(|at| at <= chrono::Utc::now()) && job.delay_ms.unwrap_or(0) <= 0;
    job.unique
        .as_ref()
        .filter(|(_, states)| due_now && states.contains(&jobs_driver::JobState::Available))
        .map(|(key, _)| key.as_slice())
}

/// The keys of `jobs` the look-up decides for, as [`HOLDERS`] takes them (`None`: none).
fn keys_json(jobs: &[NewJob]) -> Option<String> {
    let keys: Vec<String> = jobs
        .iter()
        .filter_map(looked_up_key)
        .map(|key| key.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    (!keys.is_empty()).then(|| serde_json::Value::from(keys).to_string())
}

/// What the look-up found: each held key's holder.
struct Visible(HashMap<Vec<u8>, i64>);

impl Visible {
    fn of(holders: Vec<Holder>) -> Visible {
        Visible(holders.into_iter().map(|h| (h.unique_held, h.id)).collect())
    }

    fn holder(&self, job: &NewJob) -> Option<i64> {
        looked_up_key(job).and_then(|key| self.0.get(key).copied())
    }

    /// The jobs still to insert: those whose key no visible job holds.
    fn rest(&self, jobs: &[NewJob]) -> Vec<NewJob> {
        jobs.iter().filter(|job| self.holder(job).is_none()).cloned().collect()
    }

    /// Each input's result: its key's holder, or the next result of the rest's insert.
    fn merge(&self, jobs: &[NewJob], inserted: Vec<Inserted>) -> Result<Vec<Inserted>> {
        let mut inserted = inserted.into_iter();
        jobs.iter()
            .map(|job| match self.holder(job) {
                Some(id) => Ok(Inserted { id, existing: true }),
                None => inserted.next().ok_or_else(|| {
                    jobs_driver::DriverError::unexpected("an insert returned fewer jobs than it was given")
                }),
            })
            .collect()
    }
}

/// The jobs holding the keys of `jobs`, as `conn` sees them (see the module's notes).
async fn visible_holders<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Visible>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let Some(keys) = keys_json(jobs) else { return Ok(Visible(HashMap::new())) };
    let holders: Vec<Holder> =
        crate::cached::CachedQuery::new(HOLDERS).bind::<Text, _>(keys).load(conn).await?;
    Ok(Visible::of(holders))
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
    let visible = visible_holders(conn, jobs).await?;
    if !visible.0.is_empty() {
        let rest = visible.rest(jobs);
        let (inserted, told) = Box::pin(insert_new(conn, &rest, now, wake_ups)).await?;
        return Ok((visible.merge(jobs, inserted)?, told));
    }
    insert_new(conn, jobs, now, wake_ups).await
}

/// Inserts `jobs`, none of whose keys a visible job held.
async fn insert_new<C>(
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
    let visible = match keys_json(jobs) {
        Some(keys) => {
            let query = crate::cached::CachedQuery::new(HOLDERS).bind::<Text, _>(keys);
            Visible::of(diesel::RunQueryDsl::load(query, conn).map_err(jobs_driver::DriverError::from)?)
        }
        None => Visible(HashMap::new()),
    };
    if !visible.0.is_empty() {
        let rest = visible.rest(jobs);
        let inserted = if rest.is_empty() {
            Vec::new()
        } else {
            insert_read_back::insert_sync(conn, &prepare(&rest, None, false))?
        };
        return visible.merge(jobs, inserted);
    }
    insert_read_back::insert_sync(conn, &prepare(jobs, None, false))
}
