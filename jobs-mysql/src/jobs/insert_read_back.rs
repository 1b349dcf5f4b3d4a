//! The enqueue where the insert returns nothing: on MySQL, which has no `RETURNING`, and on
//! every sync connection (the C client cannot read `INSERT … RETURNING` through a prepared
//! statement: it finds no result metadata).
//!
//! In a transaction of its own (a savepoint inside the caller's), it executes the batch's
//! statements, takes the first id the first inserting one generated (`LAST_INSERT_ID()`),
//! and reads back the rows from that id on that carry the batch's token: each new row, in
//! insert order. A row whose key was held is the job that holds the key, read by the key
//! with a locking read: the latest committed version, whatever snapshot the caller's
//! transaction reads from (the insert's `ON DUPLICATE KEY UPDATE` has locked that row
//! already, so the read never waits). Until the transaction ends, the new rows are locked
//! too (a worker's claim skips them, so none can carry another statement's token yet).
//! The wake-up rows, when asked for, are written in the same transaction.
//!
//! The savepoint is diesel's (`TransactionManager`): a transaction the caller opened
//! with diesel's `transaction` nests, one opened with a raw `BEGIN` does not (MySQL's
//! `BEGIN` commits it). A future dropped mid-way leaves the transaction open, as one of
//! diesel-async's own `transaction` would; the driver's pooled connections are then
//! closed (`pool::Lent`).

use std::collections::HashMap;

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Binary};
use diesel_async::AsyncConnection;
use jobs_driver::{DriverError, Inserted, NewJob, Notification, Result};

use super::insert_batch::{InsertedRow, Outcome, Prepared, query, results};
use super::insert_sql::RowShape;
use crate::cached::CachedQuery;
use crate::notifications;
use crate::rows::Id;

/// The first id the connection's last inserting statement generated. Ids only grow, so
/// every new row of the batch has at least the one the first inserting statement
/// generated. A statement that inserts nothing (every key held) leaves the value as it
/// was: so a batch whose first statement holds keys starts from [`NO_ID`].
const FIRST_ID: &str = "SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id";

/// Sets the connection's last insert id to 0: "none of this batch's yet".
const NO_ID: &str = "SELECT CAST(LAST_INSERT_ID(0) AS SIGNED) AS id";

/// The batch's new rows, from the first id on, in insert order (a range of the primary key).
const NEW_ROWS: &str =
    "SELECT id, lock_token, state, unique_key FROM jobs WHERE id >= $1 AND lock_token = $2 ORDER BY id";

/// The job that holds a uniqueness key, as committed now (a locking read).
const HOLDER: &str = "SELECT id, lock_token, state, unique_key FROM jobs WHERE unique_held = $1 FOR UPDATE";

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
/// crate whose `RunQueryDsl` runs the statements (`diesel_async` or `diesel`), `$add` the
/// function that writes a wake-up row, `$wait` what follows each call (`.await`, or
/// nothing).
macro_rules! insert_and_read_back {
    ($tx:ident, $prepared:ident, $wake_ups:ident, $dsl:ident, $add:path; $($wait:tt)*) => {{
        if $prepared.statements.first().is_some_and(|s| s.shape == (RowShape::Full { unique: true })) {
            $dsl::RunQueryDsl::get_result::<Id>(CachedQuery::new(NO_ID), $tx) $($wait)* ?;
        }
        let mut from = 0;
        for statement in &$prepared.statements {
            $dsl::RunQueryDsl::execute(query($prepared, statement), $tx) $($wait)* ?;
            if from == 0 {
                let first: Id = $dsl::RunQueryDsl::get_result(CachedQuery::new(FIRST_ID), $tx) $($wait)* ?;
                from = first.id;
            }
        }
        let new_rows = if from == 0 {
            Vec::new()
        } else {
            let new_rows =
                CachedQuery::new(NEW_ROWS).bind::<BigInt, _>(from).bind::<BigInt, _>($prepared.token);
            $dsl::RunQueryDsl::load::<InsertedRow>(new_rows, $tx) $($wait)* ?
        };
        let mut found = NewRows::new(new_rows);
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
        let (inserted, wake_ups) = results($prepared, outcomes)?;
        if $wake_ups {
            for wake_up in &wake_ups {
                $add($tx, wake_up) $($wait)* ?;
            }
        }
        Ok((inserted, wake_ups))
    }};
}

/// The failed read-back's own error, once its transaction has been rolled back. Where
/// the rollback fails too (a deadlock has rolled back the caller's whole transaction,
/// and the savepoint with it), the first error says what happened, and `is_transient`
/// can still tell the caller to retry.
fn rolled_back(error: DriverError, rollback: diesel::QueryResult<()>) -> DriverError {
    if let Err(rollback) = rollback {
        tracing::debug!(%rollback, %error, "the read-back insert's rollback failed after its error");
    }
    error
}

/// Inserts `prepared` (built without `RETURNING`) on `conn` and reads its rows back, in a
/// transaction of its own; with `wake_ups`, writes their rows in it too. Returns each
/// input's result and the wake-ups.
///
/// The transaction is opened and closed by hand, as `AsyncConnection::transaction` does:
/// its callback's future, nested in another transaction's (the scheduler's, the driver's),
/// would have to be `Send` for every lifetime, which the compiler cannot prove here.
pub(crate) async fn insert<C>(
    conn: &mut C,
    prepared: &Prepared<'_>,
    wake_ups: bool,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnection<Backend = Mysql>,
{
    use diesel_async::TransactionManager;
    C::TransactionManager::begin_transaction(conn).await?;
    let outcome: Result<(Vec<Inserted>, Vec<Notification>)> = async {
        let tx = &mut *conn;
        insert_and_read_back!(tx, prepared, wake_ups, diesel_async, notifications::add; .await)
    }
    .await;
    match outcome {
        Ok(done) => {
            C::TransactionManager::commit_transaction(conn).await?;
            Ok(done)
        }
        Err(error) => Err(rolled_back(error, C::TransactionManager::rollback_transaction(conn).await)),
    }
}

/// [`insert`] on a synchronous diesel connection (`MysqlConnection`, pooled or not), the
/// wake-ups' rows always included.
pub(crate) fn insert_sync<C>(conn: &mut C, prepared: &Prepared<'_>) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    use diesel::connection::TransactionManager;
    C::TransactionManager::begin_transaction(conn)?;
    let outcome: Result<(Vec<Inserted>, Vec<Notification>)> = (|| {
        let tx = &mut *conn;
        let wake_ups = true;
        insert_and_read_back!(tx, prepared, wake_ups, diesel, notifications::add_sync;)
    })();
    match outcome {
        Ok((inserted, _)) => {
            C::TransactionManager::commit_transaction(conn)?;
            Ok(inserted)
        }
        Err(error) => Err(rolled_back(error, C::TransactionManager::rollback_transaction(conn))),
    }
}
