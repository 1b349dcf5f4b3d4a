//! Inserting jobs: one multi-row `INSERT … VALUES` per [`ROWS_PER_STATEMENT`] jobs, in
//! input order, in whatever transaction the connection is in; then one
//! `job_notifications` row per queue that received available jobs (see `notifications`).
//! The statements' text, one per shape of rows, is in `insert_sql`.
//!
//! A job that holds a uniqueness key goes in with `ON DUPLICATE KEY UPDATE` on
//! `jobs_unique_idx` (the generated column that holds the key only in the job's unique
//! states): MariaDB then returns the row that holds the key. Every new row of such a
//! statement carries the statement's token in `lock_token`, so a returned row with another
//! token is an existing job (seed 002's de-duplicated insert).

use std::collections::{BTreeSet, HashMap};

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Binary, Datetime, Integer, Nullable, SmallInt, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{DriverError, Inserted, NewJob, Notification, Result};

pub(crate) use super::insert_sql::ROWS_PER_STATEMENT;
use super::insert_sql::{RowShape, statement};
use crate::cached::CachedQuery;
use crate::jobs::read::states_list;
use crate::notifications;
use crate::rows::{Id, token};
use crate::time::{naive, naive_opt};

/// A row as the insert returns it (or as the sync path reads it back).
#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    lock_token: Option<i64>,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Nullable<Binary>)]
    unique_key: Option<Vec<u8>>,
}

/// The batch after removing in-batch duplicates of a uniqueness key: `rows` go to the
/// database, `slot[i]` says which of them input `i` maps to.
struct Deduplicated<'a> {
    rows: Vec<&'a NewJob>,
    slot: Vec<usize>,
}

fn deduplicate(jobs: &[NewJob]) -> Deduplicated<'_> {
    let mut rows = Vec::with_capacity(jobs.len());
    let mut slot = Vec::with_capacity(jobs.len());
    let mut first_with_key: HashMap<&[u8], usize> = HashMap::new();
    for job in jobs {
        if let Some((key, _)) = &job.unique {
            if let Some(&first) = first_with_key.get(key.as_slice()) {
                slot.push(first);
                continue;
            }
            first_with_key.insert(key.as_slice(), rows.len());
        }
        slot.push(rows.len());
        rows.push(job);
    }
    Deduplicated { rows, slot }
}

/// A row's values that are not fields of the `NewJob` as they stand.
struct Encoded {
    tags: String,
    run_at: Option<chrono::NaiveDateTime>,
    delay_us: i64,
    unique_states: Option<String>,
}

fn encode(job: &NewJob) -> Encoded {
    Encoded {
        tags: serde_json::Value::from(job.tags.as_slice()).to_string(),
        run_at: job.run_at.map(naive),
        delay_us: job.delay_ms.unwrap_or(0).saturating_mul(1000),
        unique_states: job.unique.as_ref().map(|(_, states)| states_list(states)),
    }
}

/// A batch ready to send: the rows after de-duplication, their encoded values, one
/// statement per chunk of rows, and the token.
struct Prepared<'a> {
    batch: Deduplicated<'a>,
    encoded: Vec<Encoded>,
    statements: Vec<Statement>,
    now: Option<chrono::NaiveDateTime>,
    token: i64,
}

/// One statement of a batch: its rows `first..first + rows`, their shape and its text.
struct Statement {
    first: usize,
    rows: usize,
    shape: RowShape,
    sql: &'static str,
}

fn prepare(jobs: &[NewJob], now: Option<chrono::DateTime<chrono::Utc>>, returning: bool) -> Prepared<'_> {
    let batch = deduplicate(jobs);
    let encoded = batch.rows.iter().map(|job| encode(job)).collect();
    let mut statements = Vec::with_capacity(batch.rows.len().div_ceil(ROWS_PER_STATEMENT));
    let mut first = 0;
    for chunk in batch.rows.chunks(ROWS_PER_STATEMENT) {
        let shape = RowShape::of(chunk);
        let sql = statement(shape, chunk.len(), now.is_some(), returning);
        statements.push(Statement { first, rows: chunk.len(), shape, sql });
        first += chunk.len();
    }
    Prepared { batch, encoded, statements, now: naive_opt(now), token: token() }
}

/// `statement` of `prepared` with its parameters bound.
fn query<'a>(prepared: &'a Prepared<'_>, statement: &Statement) -> CachedQuery<'a> {
    let mut query = CachedQuery::new(statement.sql)
        .bind::<Nullable<Datetime>, _>(prepared.now)
        .bind::<BigInt, _>(prepared.token);
    for row in statement.first..statement.first + statement.rows {
        let (job, encoded) = (prepared.batch.rows[row], &prepared.encoded[row]);
        if statement.shape != RowShape::Plain {
            query = query.bind::<Nullable<Datetime>, _>(encoded.run_at).bind::<BigInt, _>(encoded.delay_us);
        }
        query = query
            .bind::<Text, _>(job.kind.as_ref())
            .bind::<Text, _>(job.queue.as_ref())
            .bind::<Text, _>(job.args.as_str())
            .bind::<Text, _>(job.meta.as_ref())
            .bind::<Text, _>(encoded.tags.as_str())
            .bind::<SmallInt, _>(job.priority)
            .bind::<Integer, _>(job.max_attempts)
            .bind::<Nullable<BigInt>, _>(job.timeout_ms);
        if statement.shape != RowShape::Plain {
            query = query
                .bind::<Nullable<Binary>, _>(job.unique.as_ref().map(|(key, _)| key.as_slice()))
                .bind::<Nullable<Text>, _>(encoded.unique_states.as_deref());
        }
    }
    query
}

/// What the database said of one row: its id, whether it is a job that was there before
/// (the holder of the row's key), and whether it is a new available job.
struct Outcome {
    id: i64,
    existing: bool,
    available: bool,
}

impl Outcome {
    fn of(row: InsertedRow, token: i64) -> Outcome {
        let existing = row.lock_token != Some(token);
        Outcome { id: row.id, existing, available: !existing && row.state == "available" }
    }

    /// A row of a plain statement: new, and available.
    fn new_available(id: i64) -> Outcome {
        Outcome { id, existing: false, available: true }
    }
}

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

/// Each input's result, and one wake-up per queue that received available jobs.
fn results(prepared: &Prepared<'_>, returned: Vec<Outcome>) -> Result<(Vec<Inserted>, Vec<Notification>)> {
    let batch = &prepared.batch;
    if returned.len() != batch.rows.len() {
        return Err(DriverError::unexpected(format!(
            "{} jobs inserted as {}",
            batch.rows.len(),
            returned.len()
        )));
    }
    let queues: BTreeSet<&str> = returned
        .iter()
        .zip(&batch.rows)
        .filter(|(r, _)| r.available)
        .map(|(_, job)| job.queue.as_ref())
        .collect();
    let wake_ups =
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect();
    let mut used = vec![false; returned.len()];
    let results = batch
        .slot
        .iter()
        .map(|&row| {
            let first_use = !std::mem::replace(&mut used[row], true);
            Inserted { id: returned[row].id, existing: returned[row].existing || !first_use }
        })
        .collect();
    Ok((results, wake_ups))
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
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let (results, wake_ups) = insert_rows(conn, jobs, now).await?;
    for wake_up in &wake_ups {
        notifications::add(conn, wake_up).await?;
    }
    Ok((results, wake_ups))
}

/// [`insert_many`] without the wake-ups' rows: the caller sees to them (a batch of at most
/// [`ROWS_PER_STATEMENT`] is then one statement, which commits by itself).
pub(crate) async fn insert_rows<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    if jobs.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let prepared = prepare(jobs, now, true);
    let mut returned = Vec::with_capacity(prepared.batch.rows.len());
    for statement in &prepared.statements {
        returned.extend(run(conn, &prepared, statement).await?);
    }
    results(&prepared, returned)
}

/// [`insert_many`] on a synchronous diesel connection (`MysqlConnection`, pooled or not),
/// in a transaction of its own (a savepoint inside the caller's): until the rows are read
/// back, a worker's claim skips them, so none can carry another statement's token yet.
pub(crate) fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    conn.transaction::<_, DriverError, _>(|conn| {
        let prepared = prepare(jobs, None, false);
        // Every new row's id is at least the first one the first statement generated (ids
        // only grow; a statement that inserted nothing leaves an earlier, lower value).
        let mut after = None;
        for statement in &prepared.statements {
            diesel::RunQueryDsl::execute(query(&prepared, statement), conn)?;
            if after.is_none() {
                let first: Id = diesel::RunQueryDsl::get_result(
                    CachedQuery::new("SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id"),
                    conn,
                )?;
                after = Some(first.id);
            }
        }
        let returned = read_back_sync(conn, &prepared, after.unwrap_or(0))?
            .into_iter()
            .map(|row| Outcome::of(row, prepared.token))
            .collect();
        let (results, wake_ups) = results(&prepared, returned)?;
        for wake_up in &wake_ups {
            notifications::add_sync(conn, wake_up)?;
        }
        Ok(results)
    })
}

/// Each row of `prepared` as `RETURNING` would have given it, read back on a sync
/// connection (the C client cannot read `INSERT … RETURNING` through a prepared
/// statement: it finds no result metadata). The new rows carry the token, in insert
/// order, from id `from` on; a row whose key was held is the job that holds it.
fn read_back_sync<C>(conn: &mut C, prepared: &Prepared<'_>, from: i64) -> Result<Vec<InsertedRow>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    const NEW_ROWS: &str =
        "SELECT id, lock_token, state, unique_key FROM jobs WHERE id >= $1 AND lock_token = $2 ORDER BY id";
    const HOLDER: &str = "SELECT id, lock_token, state, unique_key FROM jobs WHERE unique_held = $1";
    let new_rows: Vec<InsertedRow> = diesel::RunQueryDsl::load(
        CachedQuery::new(NEW_ROWS).bind::<BigInt, _>(from).bind::<BigInt, _>(prepared.token),
        conn,
    )?;
    let mut keyed: HashMap<Vec<u8>, InsertedRow> = HashMap::new();
    let mut plain = Vec::with_capacity(new_rows.len());
    for row in new_rows {
        match row.unique_key.clone() {
            Some(key) => {
                keyed.insert(key, row);
            }
            None => plain.push(row),
        }
    }
    let mut plain = plain.into_iter();
    let mut rows = Vec::with_capacity(prepared.batch.rows.len());
    for job in &prepared.batch.rows {
        let row = match &job.unique {
            None => plain.next(),
            Some((key, _)) => match keyed.remove(key.as_slice()) {
                Some(row) => Some(row),
                None => diesel::RunQueryDsl::load::<InsertedRow>(
                    CachedQuery::new(HOLDER).bind::<Binary, _>(key.as_slice()),
                    conn,
                )?
                .pop(),
            },
        };
        let row = row.ok_or_else(|| DriverError::unexpected("an inserted job could not be read back"))?;
        rows.push(row);
    }
    Ok(rows)
}
