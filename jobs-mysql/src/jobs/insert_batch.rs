//! A batch of jobs ready to insert: de-duplicated by uniqueness key, encoded, cut into
//! statements of at most [`ROWS_PER_STATEMENT`] rows with their parameters bound; and what
//! the database said of each row, turned into each input's result and the wake-ups.

use std::collections::BTreeSet;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Binary, Datetime, Integer, Nullable, SmallInt, Text};
use jobs_driver::{Deduplicated, Inserted, NewJob, Notification, Result};

use super::insert_sql::{ROWS_PER_STATEMENT, RowShape, statement};
use crate::cached::CachedQuery;
use crate::jobs::read::states_list;
use crate::rows::token;
use crate::time::{naive, naive_opt};

/// A row as the insert returns it (or as the sync path reads it back).
#[derive(QueryableByName)]
pub(crate) struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(crate) lock_token: Option<i64>,
    #[diesel(sql_type = Text)]
    pub(crate) state: String,
    #[diesel(sql_type = Nullable<Binary>)]
    pub(crate) unique_key: Option<Vec<u8>>,
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
pub(crate) struct Prepared<'a> {
    pub(crate) batch: Deduplicated<'a>,
    encoded: Vec<Encoded>,
    pub(crate) statements: Vec<Statement>,
    now: Option<chrono::NaiveDateTime>,
    pub(crate) token: i64,
}

/// One statement of a batch: its rows `first..first + rows`, their shape and its text.
pub(crate) struct Statement {
    first: usize,
    pub(crate) rows: usize,
    pub(crate) shape: RowShape,
    sql: &'static str,
}

pub(crate) fn prepare(
    jobs: &[NewJob],
    now: Option<chrono::DateTime<chrono::Utc>>,
    returning: bool,
) -> Prepared<'_> {
    let batch = Deduplicated::new(jobs);
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
pub(crate) fn query<'a>(prepared: &'a Prepared<'_>, statement: &Statement) -> CachedQuery<'a> {
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
pub(crate) struct Outcome {
    id: i64,
    existing: bool,
    available: bool,
}

impl Outcome {
    pub(crate) fn of(row: InsertedRow, token: i64) -> Outcome {
        let existing = row.lock_token != Some(token);
        Outcome { id: row.id, existing, available: !existing && row.state == "available" }
    }

    /// A row of a plain statement: new, and available.
    pub(crate) fn new_available(id: i64) -> Outcome {
        Outcome { id, existing: false, available: true }
    }
}

/// Each input's result, and one wake-up per queue that received available jobs.
pub(crate) fn results(
    prepared: &Prepared<'_>,
    returned: Vec<Outcome>,
) -> Result<(Vec<Inserted>, Vec<Notification>)> {
    let batch = &prepared.batch;
    let per_row: Vec<Inserted> =
        returned.iter().map(|r| Inserted { id: r.id, existing: r.existing }).collect();
    let results = batch.results(&per_row)?;
    let queues: BTreeSet<&str> = returned
        .iter()
        .zip(&batch.rows)
        .filter(|(r, _)| r.available)
        .map(|(_, job)| job.queue.as_ref())
        .collect();
    let wake_ups =
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect();
    Ok((results, wake_ups))
}
