//! Enqueueing with `INSERT … RETURNING` switched off (`disable_insert_returning`), as every
//! insert runs on MySQL, here on whichever server the tests use (MariaDB unless
//! `JOBS_MYSQL_BIN` or `MYSQL_URL` says otherwise). The rows are read back by their token,
//! in the application's transaction or in a transaction of their own
//! on a connection in autocommit mode; a key held by another job returns that job, even one
//! committed after the application's snapshot (REPEATABLE READ).

use std::time::Duration;

use diesel::sql_types::{BigInt, Nullable};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use jobs_core::driver::NewJob;
use jobs_core::testing::MysqlTestDatabase;
use jobs_core::{EnqueueRequest, Enqueued, JobContext, enqueue_many, job};
use jobs_tests::app::{AppError, Rollback, Welcome, welcome};
use serde::{Deserialize, Serialize};

/// Sends the welcome mail.
#[job(queue = "mail")]
async fn send_welcome(_ctx: JobContext, args: Welcome) -> Result<(), std::io::Error> {
    let _ = args;
    Ok(())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sync {
    account: i64,
}

#[job(kind = "accounts.sync", unique(fields(account), states(available, scheduled, running, retryable)))]
async fn sync_account(_ctx: JobContext, _args: Sync) -> Result<(), std::io::Error> {
    Ok(())
}

#[derive(diesel::QueryableByName)]
struct Row {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    lock_token: Option<i64>,
}

async fn rows(conn: &mut AsyncMysqlConnection) -> Vec<Row> {
    diesel::sql_query("SELECT id, lock_token FROM jobs ORDER BY id").load(conn).await.expect("rows")
}

/// More than one statement's worth (100) of jobs due now without a key.
fn batch() -> Vec<EnqueueRequest<send_welcome>> {
    (0..150).map(|i| send_welcome::build(welcome(i))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_returning_off_the_rows_are_read_back_in_the_callers_transaction_and_keys_return_their_holder() {
    jobs_core::mysql::disable_insert_returning();
    let db = MysqlTestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let holder = sync_account::enqueue(&mut conn, Sync { account: 7 }).await.expect("the key's holder");
    assert!(!holder.existing);

    let rolled_back: Result<(), AppError> = conn
        .transaction(async |tx| {
            enqueue_many(&mut *tx, batch()).await?;
            let again = sync_account::enqueue(&mut *tx, Sync { account: 7 }).await?;
            assert_eq!((again.id, again.existing), (holder.id, true), "the holder, seen inside");
            Err(Rollback.into())
        })
        .await;
    assert!(matches!(rolled_back, Err(AppError::Rule(Rollback))), "{rolled_back:?}");
    assert_eq!(rows(&mut conn).await.len(), 1, "only the holder is left");

    let (plain, keyed, later): (Vec<Enqueued>, Vec<Enqueued>, Enqueued) = conn
        .transaction::<_, AppError, _>(async |tx| {
            let plain = enqueue_many(&mut *tx, batch()).await?;
            let keyed = enqueue_many(
                &mut *tx,
                [8, 7, 8, 9].into_iter().map(|account| sync_account::build(Sync { account })),
            )
            .await?;
            let later = send_welcome::build(welcome(1000))
                .run_in(Duration::from_secs(3600))
                .enqueue(&mut *tx)
                .await?;
            Ok((plain, keyed, later))
        })
        .await
        .expect("commit");

    let stored = rows(&mut conn).await;
    let plain_ids: Vec<i64> = plain.iter().map(|e| e.id).collect();
    let mut sorted = plain_ids.clone();
    sorted.sort_unstable();
    assert_eq!(plain_ids, sorted, "in input order");
    assert!(plain.iter().all(|e| !e.existing));
    assert!(
        stored.iter().filter(|r| plain_ids.contains(&r.id)).all(|r| r.lock_token.is_some()),
        "every plain row carries its batch's token: the rows were read back, not returned"
    );
    let keyed: Vec<(i64, bool)> = keyed.iter().map(|e| (e.id, e.existing)).collect();
    assert_eq!(keyed[1], (holder.id, true), "a key held by a committed job returns that job");
    assert_eq!(keyed[2], (keyed[0].0, true), "a key given twice is one job");
    assert!(!keyed[0].1 && !keyed[3].1 && keyed[0].0 != keyed[3].0);
    assert!(!later.existing);
    assert_eq!(stored.len(), 1 + 150 + 2 + 1, "the holder, the batch, two new keys, the later job");
    let later = jobs_core::get_job(&mut conn, later.id).await.expect("get").expect("the later job");
    assert_eq!(later.state, jobs_core::JobState::Scheduled);
}

/// Fails the insert of any job of kind `boom`, as a server-side error in mid-batch would.
const BOOM: &str = "CREATE TRIGGER boom BEFORE INSERT ON jobs FOR EACH ROW \
     IF NEW.kind = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom'; END IF";

/// One statement's worth of jobs, then a job whose statement fails.
fn failing_batch() -> Vec<NewJob> {
    let batch = (0..100).map(|i| send_welcome::build(welcome(i)).to_new_job().expect("job"));
    batch.chain([NewJob::new("boom", "mail", "{}")]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_returning_off_a_connection_in_autocommit_mode_commits_the_batch_by_itself() {
    jobs_core::mysql::disable_insert_returning();
    let db = MysqlTestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    conn.batch_execute(BOOM).await.expect("trigger");
    let mut other = db.connect().await.expect("connect");

    // All or nothing: the second statement fails, and the first one's rows go with it.
    assert!(enqueue_many(&mut conn, failing_batch()).await.is_err());
    assert!(rows(&mut other).await.is_empty(), "the batch's own transaction rolled back");
    let inserted = enqueue_many(&mut conn, batch()).await.expect("enqueue");
    assert_eq!(inserted.len(), 150);
    assert_eq!(rows(&mut other).await.len(), 150, "committed");

    // The same on a sync connection.
    let url = db.url().to_owned();
    let (failed, inserted) = tokio::task::spawn_blocking(move || {
        let mut sync =
            <diesel::MysqlConnection as diesel::Connection>::establish(&url).expect("sync connect");
        let failed = jobs_core::enqueue_many_sync(&mut sync, failing_batch()).is_err();
        (failed, jobs_core::enqueue_many_sync(&mut sync, batch()).expect("enqueue").len())
    })
    .await
    .expect("blocking task");
    assert!(failed);
    assert_eq!(inserted, 150);
    assert_eq!(rows(&mut other).await.len(), 300, "only the whole batch");

    // The connection is left as it was found: a transaction of the application's still
    // opens and rolls back.
    let rolled_back: Result<(), AppError> = conn
        .transaction(async |tx| {
            send_welcome::enqueue(&mut *tx, welcome(1)).await?;
            Err(Rollback.into())
        })
        .await;
    assert!(matches!(rolled_back, Err(AppError::Rule(Rollback))));
    assert_eq!(rows(&mut other).await.len(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_returning_off_a_key_committed_after_the_callers_snapshot_returns_its_holder() {
    jobs_core::mysql::disable_insert_returning();
    let db = MysqlTestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    // An application's connection as MySQL sets it up by default.
    conn.batch_execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ").await.expect("isolation");
    let mut other = db.connect().await.expect("connect");
    let (holder, again) = conn
        .transaction::<_, AppError, _>(async |tx| {
            assert!(rows(tx).await.is_empty(), "the transaction's snapshot starts here, empty");
            let holder = sync_account::enqueue(&mut other, Sync { account: 7 }).await?;
            let again = sync_account::enqueue(&mut *tx, Sync { account: 7 }).await?;
            Ok((holder, again))
        })
        .await
        .expect("commit");
    assert!(!holder.existing);
    assert_eq!((again.id, again.existing), (holder.id, true), "the holder committed after the snapshot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_returning_off_a_statement_that_inserts_nothing_reads_back_no_other_statements_rows() {
    jobs_core::mysql::disable_insert_returning();
    let db = MysqlTestDatabase::new().await.expect("test database");
    let held: Vec<NewJob> =
        (0..100).map(|account| sync_account::build(Sync { account }).to_new_job().expect("job")).collect();
    let holders =
        enqueue_many(&mut db.connect().await.expect("connect"), held.clone()).await.expect("holders");

    let mut conn = db.connect().await.expect("connect");
    // Three statements: 100 new jobs, 100 whose keys are all held (it inserts nothing, and
    // leaves the connection's last insert id to the first), 50 new jobs.
    let new = |from: i64, n: i64| {
        (from..from + n).map(|i| send_welcome::build(welcome(i)).to_new_job().expect("job"))
    };
    let batch: Vec<NewJob> = new(0, 100).chain(held).chain(new(100, 50)).collect();
    let inserted = enqueue_many(&mut conn, batch).await.expect("enqueue");

    let holder_ids: Vec<i64> = holders.iter().map(|e| e.id).collect();
    let got: Vec<i64> = inserted[100..200].iter().map(|e| e.id).collect();
    assert_eq!(got, holder_ids, "the holders, in order");
    assert!(inserted[100..200].iter().all(|e| e.existing));
    let mut new_ids: Vec<i64> = inserted[..100].iter().chain(&inserted[200..]).map(|e| e.id).collect();
    assert!(inserted[..100].iter().chain(&inserted[200..]).all(|e| !e.existing));
    assert!(new_ids.windows(2).all(|w| w[0] < w[1]), "150 new jobs, in input order: {new_ids:?}");
    new_ids.sort_unstable();
    let stored: Vec<i64> =
        rows(&mut conn).await.iter().map(|r| r.id).filter(|id| !holder_ids.contains(id)).collect();
    assert_eq!(new_ids, stored, "each new job's own row");
}
