//! The enqueue where the insert returns nothing: on MySQL, which has no `RETURNING`, and on
//! every sync connection (the C client cannot read `INSERT … RETURNING` through a prepared
//! statement: it finds no result metadata).
//!
//! In a transaction of its own (a savepoint inside the caller's), it executes the batch's
//! statements, takes the first id the first one generated (`LAST_INSERT_ID()`), and reads
//! back the rows from that id on that carry the batch's token: each new row, in insert
//! order. A row whose key was held is the job that holds the key, read by the key. Until
//! the transaction ends, the new rows are locked (a worker's claim skips them, so none
//! can carry another statement's token yet) and so is each holder (the insert's
//! `ON DUPLICATE KEY UPDATE` locked it, so it keeps its key).

use std::collections::HashMap;

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Binary};
use diesel_async::{AsyncConnection, TransactionManager};
use jobs_driver::{DriverError, NewJob, Result};

use super::insert_batch::{InsertedRow, Outcome, Prepared, query};
use crate::cached::CachedQuery;
use crate::rows::Id;

/// The first id the connection's last insert generated. Ids only grow, so every new row
/// of the batch has at least the one the first statement generated; a first statement
/// that inserted nothing (every key held) leaves an earlier, lower value.
const FIRST_ID: &str = "SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id";

/// The batch's new rows, from the first id on, in insert order.
const NEW_ROWS: &str =
    "SELECT id, lock_token, state, unique_key FROM jobs WHERE id >= $1 AND lock_token = $2 ORDER BY id";

/// The job that holds a uniqueness key.
const HOLDER: &str = "SELECT id, lock_token, state, unique_key FROM jobs WHERE unique_held = $1";

/// The new rows read back, to hand out to the batch's jobs in order.
struct NewRows {
    keyed: HashMap<Vec<u8>, InsertedRow>,
    plain: std::vec::IntoIter<InsertedRow>,
}

/// Where a job's row comes from.
enum Found<'j> {
    /// It is one of the new rows.
    New(InsertedRow),
    /// Its key was held: the holder is to be read by this key.
    Held(&'j [u8]),
}

impl NewRows {
    fn new(rows: Vec<InsertedRow>) -> NewRows {
        let mut keyed = HashMap::new();
        let mut plain = Vec::with_capacity(rows.len());
        for row in rows {
            match row.unique_key.clone() {
                Some(key) => {
                    keyed.insert(key, row);
                }
                None => plain.push(row),
            }
        }
        NewRows { keyed, plain: plain.into_iter() }
    }

    /// The row of `job`, the next of the batch.
    fn take<'j>(&mut self, job: &'j NewJob) -> Result<Found<'j>> {
        match &job.unique {
            None => self.plain.next().map(Found::New).ok_or_else(not_read_back),
            Some((key, _)) => Ok(match self.keyed.remove(key.as_slice()) {
                Some(row) => Found::New(row),
                None => Found::Held(key),
            }),
        }
    }
}

fn not_read_back() -> DriverError {
    DriverError::unexpected("an inserted job could not be read back")
}

/// The body of [`insert`] and [`insert_sync`], on `$tx` in a transaction: `$dsl` is the
/// crate whose `RunQueryDsl` runs the statements (`diesel_async` or `diesel`), `$wait`
/// what follows each call (`.await`, or nothing).
macro_rules! insert_and_read_back {
    ($tx:ident, $prepared:ident, $dsl:ident; $($wait:tt)*) => {{
        let mut from = None;
        for statement in &$prepared.statements {
            $dsl::RunQueryDsl::execute(query($prepared, statement), $tx) $($wait)* ?;
            if from.is_none() {
                let first: Id = $dsl::RunQueryDsl::get_result(CachedQuery::new(FIRST_ID), $tx) $($wait)* ?;
                from = Some(first.id);
            }
        }
        let new_rows = CachedQuery::new(NEW_ROWS)
            .bind::<BigInt, _>(from.unwrap_or(0))
            .bind::<BigInt, _>($prepared.token);
        let mut found = NewRows::new($dsl::RunQueryDsl::load::<InsertedRow>(new_rows, $tx) $($wait)* ?);
        let mut outcomes = Vec::with_capacity($prepared.batch.rows.len());
        for job in &$prepared.batch.rows {
            let row = match found.take(job)? {
                Found::New(row) => row,
                Found::Held(key) => {
                    let holder = CachedQuery::new(HOLDER).bind::<Binary, _>(key);
                    $dsl::RunQueryDsl::load::<InsertedRow>(holder, $tx) $($wait)* ?
                        .pop()
                        .ok_or_else(not_read_back)?
                }
            };
            outcomes.push(Outcome::of(row, $prepared.token));
        }
        Ok(outcomes)
    }};
}

/// Inserts `prepared` (built without `RETURNING`) on `conn` and reads its rows back, in a
/// transaction of its own. Returns each row's outcome, in order.
///
/// The transaction is opened and closed by hand, as `AsyncConnection::transaction` does:
/// its callback's future, nested in another transaction's (the scheduler's, the driver's),
/// would have to be `Send` for every lifetime, which the compiler cannot prove here.
pub(crate) async fn insert<C>(conn: &mut C, prepared: &Prepared<'_>) -> Result<Vec<Outcome>>
where
    C: AsyncConnection<Backend = Mysql>,
{
    C::TransactionManager::begin_transaction(conn).await?;
    let outcome: Result<Vec<Outcome>> = async {
        let tx = &mut *conn;
        insert_and_read_back!(tx, prepared, diesel_async; .await)
    }
    .await;
    match outcome {
        Ok(outcomes) => {
            C::TransactionManager::commit_transaction(conn).await?;
            Ok(outcomes)
        }
        Err(error) => match C::TransactionManager::rollback_transaction(conn).await {
            Ok(()) | Err(diesel::result::Error::BrokenTransactionManager) => Err(error),
            Err(rollback) => Err(rollback.into()),
        },
    }
}

/// [`insert`] on a synchronous diesel connection (`MysqlConnection`, pooled or not).
pub(crate) fn insert_sync<C>(conn: &mut C, prepared: &Prepared<'_>) -> Result<Vec<Outcome>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    conn.transaction::<_, DriverError, _>(|tx| insert_and_read_back!(tx, prepared, diesel;))
}
