//! The enqueue where the insert returns nothing: on MySQL, which has no `RETURNING`, and on
//! every sync connection (the C client cannot read `INSERT … RETURNING` through a prepared
//! statement: it finds no result metadata).
//!
//! After each statement, it reads back the rows from the first id the statement generated
//! (`LAST_INSERT_ID()`) that carry the batch's token: the statement's new rows, in insert
//! order (ids only grow, so the rows of the batch's earlier statements lie below). A
//! statement with uniqueness keys may insert nothing, which leaves `LAST_INSERT_ID()` as it
//! was: so it starts from 0 and reads its rows back only when it generated an id. A row
//! whose key was held is the job that holds the key, read by the key with a locking read:
//! the latest committed version, whatever snapshot the caller's transaction reads from (the
//! insert's `ON DUPLICATE KEY UPDATE` has locked that row already, so the read never waits).
//! The wake-up rows, when asked for, are written after the rows.
//!
//! All of it runs in a transaction, so that the new rows stay locked until they have been
//! read back (a worker's claim skips them, so none can carry a claim's token yet): the
//! caller's, when diesel's `TransactionManager` says the connection is in one, else one of
//! its own. A transaction diesel does not know of (a raw `BEGIN`, `autocommit = 0`) is
//! committed by that `BEGIN`; one the server ended behind diesel's back (a DDL statement
//! commits implicitly) leaves each statement to commit alone, and a claim between a
//! statement and its read-back then fails the call: it reads back rows one for one, or
//! errs. A future dropped mid-way leaves its own transaction open, as one of diesel-async's
//! own `transaction` would; the driver's pooled connections are then closed (`pool::Lent`).
//! The connection's `LAST_INSERT_ID()` afterwards is the batch's (0 when its last
//! statement with keys inserted nothing).

use std::collections::HashMap;

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Binary};
use diesel_async::AsyncConnection;
use jobs_driver::{DriverError, Inserted, NewJob, Notification, Result};

use super::insert_batch::{InsertedRow, Outcome, Prepared, query, results};
use super::insert_sql::{LAST_INSERT_ID, RowShape};
use crate::cached::CachedQuery;
use crate::notifications;
use crate::rows::Id;

/// The rows the connection's last inserting statement added, in insert order (a range of
/// the primary key from the first id it generated, which stops at the statement's row
/// count rather than run on through the rows other connections inserted since).
const LAST_STATEMENTS_ROWS: &str = "SELECT id, lock_token, state, unique_key FROM jobs \
     WHERE id >= LAST_INSERT_ID() AND lock_token = $1 ORDER BY id LIMIT $2";

/// Sets the connection's last insert id to 0, before a statement that may insert nothing.
const NO_ID: &str = "SELECT CAST(LAST_INSERT_ID(0) AS SIGNED) AS id";

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
        for mut row in rows {
            match row.unique_key.take() {
                Some(key) => {
                    keyed.insert(key, row);
                }
                None => plain.push(row),
            }
        }
        NewRows { keyed, plain: plain.into_iter() }
    }

    /// Whether every row read back has gone to a job (one left over would be a row of
    /// another statement, its neighbours' ids shifted onto the wrong jobs).
    fn is_used_up(&mut self) -> bool {
        self.keyed.is_empty() && self.plain.next().is_none()
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
    DriverError::unexpected("the inserted jobs could not be read back one for one")
}

/// The body of [`insert`] and [`insert_sync`], on `$tx` in a transaction: `$dsl` is the
/// crate whose `RunQueryDsl` runs the statements (`diesel_async` or `diesel`), `$add` the
/// function that writes a wake-up row, `$wait` what follows each call (`.await`, or
/// nothing).
macro_rules! insert_and_read_back {
    ($tx:ident, $prepared:ident, $wake_ups:ident, $dsl:ident, $add:path; $($wait:tt)*) => {{
        let mut new_rows = Vec::with_capacity($prepared.batch.rows.len());
        for statement in &$prepared.statements {
            let may_insert_nothing = statement.shape == (RowShape::Full { unique: true });
            if may_insert_nothing {
                $dsl::RunQueryDsl::get_result::<Id>(CachedQuery::new(NO_ID), $tx) $($wait)* ?;
            }
            $dsl::RunQueryDsl::execute(query($prepared, statement), $tx) $($wait)* ?;
            if may_insert_nothing {
                let first: Id = $dsl::RunQueryDsl::get_result(CachedQuery::new(LAST_INSERT_ID), $tx) $($wait)* ?;
                if first.id == 0 {
                    continue;
                }
            }
            let rows = CachedQuery::new(LAST_STATEMENTS_ROWS)
                .bind::<BigInt, _>($prepared.token)
                .bind::<BigInt, _>(statement.rows as i64);
            let rows = $dsl::RunQueryDsl::load::<InsertedRow>(rows, $tx) $($wait)* ?;
            // Every row of a statement without keys is new; one with keys adds at most its rows.
            if rows.len() > statement.rows || (!may_insert_nothing && rows.len() < statement.rows) {
                return Err(not_read_back());
            }
            new_rows.extend(rows);
        }
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
        if !found.is_used_up() {
            return Err(not_read_back());
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
/// the rollback fails too (the connection broke, say), the first error still says what
/// happened, and `is_transient` can still tell the caller to retry.
fn rolled_back(error: DriverError, rollback: diesel::QueryResult<()>) -> DriverError {
    if let Err(rollback) = rollback {
        tracing::debug!(%rollback, %error, "the read-back insert's rollback failed after its error");
    }
    error
}

/// Inserts `prepared` (built without `RETURNING`) on `conn` and reads its rows back, in
/// the connection's transaction or one of its own; with `wake_ups`, writes their rows too.
/// Returns each input's result and the wake-ups.
pub(crate) async fn insert<C>(
    conn: &mut C,
    prepared: &Prepared<'_>,
    wake_ups: bool,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnection<Backend = Mysql>,
{
    let own = jobs_driver::begin_own_transaction(conn).await?;
    let outcome: Result<(Vec<Inserted>, Vec<Notification>)> = async {
        let tx = &mut *conn;
        insert_and_read_back!(tx, prepared, wake_ups, diesel_async, notifications::add; .await)
    }
    .await;
    jobs_driver::end_own_transaction(conn, own, outcome).await
}

/// [`insert`] on a synchronous diesel connection (`MysqlConnection`, pooled or not), the
/// wake-ups' rows always included.
pub(crate) fn insert_sync<C>(conn: &mut C, prepared: &Prepared<'_>) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    use diesel::connection::TransactionManager;
    let own = C::TransactionManager::transaction_manager_status_mut(conn).transaction_depth()?.is_none();
    if own {
        C::TransactionManager::begin_transaction(conn)?;
    }
    let outcome: Result<(Vec<Inserted>, Vec<Notification>)> = (|| {
        let (tx, wake_ups) = (&mut *conn, true);
        insert_and_read_back!(tx, prepared, wake_ups, diesel, notifications::add_sync;)
    })();
    if !own {
        return outcome.map(|(inserted, _)| inserted);
    }
    match outcome {
        Ok((inserted, _)) => {
            C::TransactionManager::commit_transaction(conn)?;
            Ok(inserted)
        }
        Err(error) => Err(rolled_back(error, C::TransactionManager::rollback_transaction(conn))),
    }
}
