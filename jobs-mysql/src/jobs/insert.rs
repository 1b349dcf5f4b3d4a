//! Inserting jobs: one multi-row `INSERT … VALUES` per [`ROWS_PER_STATEMENT`] jobs, in
//! input order, in whatever transaction the connection is in; then one
//! `job_notifications` row per queue that received available jobs (see `notifications`).
//!
//! Every value is a bound parameter; the statement's text depends only on the number of
//! rows, whether the batch has uniqueness keys, and whether the clock is injected, so a
//! connection prepares each shape once (at most `2 × 2 × ROWS_PER_STATEMENT` texts; a
//! `JSON_TABLE` over one JSON array, the earlier form, cost the server 35 % more per
//! job). A row's `scheduled_at` and `state` are computed from its `created_at` in the
//! same row (MySQL and MariaDB let a value name a column set before it), so the
//! database's clock is read once per statement.
//!
//! A job that holds a uniqueness key goes in with `ON DUPLICATE KEY UPDATE` on
//! `jobs_unique_idx` (the generated column that holds the key only in the job's unique
//! states): MariaDB then returns the row that holds the key. Every new row carries the
//! statement's token in `lock_token`, so a returned row with another token is an existing
//! job (seed 002's de-duplicated insert).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Binary, Datetime, Integer, Nullable, SmallInt, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{DriverError, Inserted, NewJob, Notification, Result};

use crate::cached::CachedQuery;
use crate::jobs::read::states_list;
use crate::notifications;
use crate::rows::token;
use crate::time::{naive, naive_opt};

/// The most rows one statement inserts; a larger batch takes several, in one transaction.
pub(crate) const ROWS_PER_STATEMENT: usize = 100;

/// Parameters per row (after `$1` the injected clock and `$2` the token).
const PARAMS_PER_ROW: usize = 12;

/// The statement for `rows` rows. `$1` is the injected clock (`clock`) or unused,
/// `$2` the token. With `returning`, it returns each row (the new one, or the one that
/// holds its key).
fn statement(rows: usize, unique: bool, clock: bool, returning: bool) -> String {
    let now = if clock { "$1" } else { "UTC_TIMESTAMP(6)" };
    let mut sql = String::with_capacity(300 + rows * 190);
    sql.push_str(
        "INSERT INTO jobs (created_at, scheduled_at, state, kind, queue, args, meta, tags, priority, \
         max_attempts, timeout_ms, attempted_by, errors, unique_key, unique_states, lock_token) VALUES ",
    );
    for row in 0..rows {
        let p = 3 + row * PARAMS_PER_ROW;
        if row > 0 {
            sql.push_str(",\n");
        }
        // Writing to a String cannot fail.
        let _ = write!(
            sql,
            "({now}, COALESCE(${p}, created_at + INTERVAL ${} MICROSECOND), \
             IF(scheduled_at > created_at, 'scheduled', 'available'), \
             ${}, ${}, ${}, ${}, ${}, ${}, ${}, ${}, '[]', '[]', ${}, ${}, $2)",
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5,
            p + 6,
            p + 7,
            p + 8,
            p + 9,
            p + 10,
            p + 11,
        );
    }
    if unique {
        sql.push_str("\nON DUPLICATE KEY UPDATE jobs.id = jobs.id");
    }
    if returning {
        sql.push_str("\nRETURNING id, lock_token, state, queue, unique_key");
    }
    sql
}

/// A row as the insert returns it (or as the sync path reads it back).
#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    lock_token: Option<i64>,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    queue: String,
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
    /// (first row, rows, text) per statement.
    statements: Vec<(usize, usize, String)>,
    now: Option<chrono::NaiveDateTime>,
    token: i64,
}

fn prepare(jobs: &[NewJob], now: Option<chrono::DateTime<chrono::Utc>>, returning: bool) -> Prepared<'_> {
    let batch = deduplicate(jobs);
    let encoded = batch.rows.iter().map(|job| encode(job)).collect();
    let mut statements = Vec::with_capacity(batch.rows.len().div_ceil(ROWS_PER_STATEMENT));
    let mut first = 0;
    for chunk in batch.rows.chunks(ROWS_PER_STATEMENT) {
        let unique = chunk.iter().any(|job| job.unique.is_some());
        statements.push((first, chunk.len(), statement(chunk.len(), unique, now.is_some(), returning)));
        first += chunk.len();
    }
    Prepared { batch, encoded, statements, now: naive_opt(now), token: token() }
}

/// Statement `index` of `prepared` with its parameters bound.
fn query<'a>(prepared: &'a Prepared<'_>, index: usize) -> CachedQuery<'a> {
    let (first, rows, sql) = &prepared.statements[index];
    let mut query = CachedQuery::new(sql.as_str())
        .bind::<Nullable<Datetime>, _>(prepared.now)
        .bind::<BigInt, _>(prepared.token);
    for row in *first..first + rows {
        let (job, encoded) = (prepared.batch.rows[row], &prepared.encoded[row]);
        query = query
            .bind::<Nullable<Datetime>, _>(encoded.run_at)
            .bind::<BigInt, _>(encoded.delay_us)
            .bind::<Text, _>(job.kind.as_ref())
            .bind::<Text, _>(job.queue.as_ref())
            .bind::<Text, _>(job.args.as_str())
            .bind::<Text, _>(job.meta.as_ref())
            .bind::<Text, _>(encoded.tags.as_str())
            .bind::<SmallInt, _>(job.priority)
            .bind::<Integer, _>(job.max_attempts)
            .bind::<Nullable<BigInt>, _>(job.timeout_ms)
            .bind::<Nullable<Binary>, _>(job.unique.as_ref().map(|(key, _)| key.as_slice()))
            .bind::<Nullable<Text>, _>(encoded.unique_states.as_deref());
    }
    query
}

/// Each input's result, and one wake-up per queue that received available jobs.
fn results(
    prepared: &Prepared<'_>,
    returned: Vec<InsertedRow>,
) -> Result<(Vec<Inserted>, Vec<Notification>)> {
    let batch = &prepared.batch;
    if returned.len() != batch.rows.len() {
        return Err(DriverError::unexpected(format!(
            "{} jobs inserted as {}",
            batch.rows.len(),
            returned.len()
        )));
    }
    let mut queues = BTreeSet::new();
    let per_row: Vec<Inserted> = returned
        .iter()
        .map(|r| {
            let existing = r.lock_token != Some(prepared.token);
            if !existing && r.state == "available" {
                queues.insert(r.queue.as_str());
            }
            Inserted { id: r.id, existing }
        })
        .collect();
    let wake_ups =
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect();
    let mut used = vec![false; per_row.len()];
    let results = batch
        .slot
        .iter()
        .map(|&row| {
            let first_use = !std::mem::replace(&mut used[row], true);
            Inserted { id: per_row[row].id, existing: per_row[row].existing || !first_use }
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
    let mut returned: Vec<InsertedRow> = Vec::with_capacity(prepared.batch.rows.len());
    for index in 0..prepared.statements.len() {
        returned.extend(query(&prepared, index).load::<InsertedRow>(conn).await?);
    }
    results(&prepared, returned)
}

/// [`insert_many`] on a synchronous diesel connection (`MysqlConnection`, pooled or not).
pub(crate) fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let prepared = prepare(jobs, None, false);
    for index in 0..prepared.statements.len() {
        diesel::RunQueryDsl::execute(query(&prepared, index), conn)?;
    }
    let returned = read_back_sync(conn, &prepared)?;
    let (results, wake_ups) = results(&prepared, returned)?;
    for wake_up in &wake_ups {
        notifications::add_sync(conn, wake_up)?;
    }
    Ok(results)
}

/// Each row of `prepared` as `RETURNING` would have given it, read back on a sync
/// connection (the C client cannot read `INSERT … RETURNING` through a prepared
/// statement: it finds no result metadata). The new rows carry the token, in insert
/// order; a row whose key was held is the job that holds it.
fn read_back_sync<C>(conn: &mut C, prepared: &Prepared<'_>) -> Result<Vec<InsertedRow>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    const NEW_ROWS: &str =
        "SELECT id, lock_token, state, queue, unique_key FROM jobs WHERE lock_token = $1 ORDER BY id";
    const HOLDER: &str = "SELECT id, lock_token, state, queue, unique_key FROM jobs WHERE unique_held = $1";
    let new_rows: Vec<InsertedRow> =
        diesel::RunQueryDsl::load(CachedQuery::new(NEW_ROWS).bind::<BigInt, _>(prepared.token), conn)?;
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
