//! Enqueueing on the application's own MariaDB/MySQL connections, inside its transactions:
//! async diesel (`AsyncMysqlConnection`) and sync diesel (`MysqlConnection`, which links
//! the MariaDB client library). A rollback takes the jobs back with the business rows; a
//! commit makes them visible together, and a worker on the driver runs them.

use std::time::Duration;

use diesel::Connection;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use jobs_core::testing::MysqlTestDatabase;
use jobs_core::{JobContext, Outcome};
use jobs_core::{JobState, Registry, Worker, enqueue_many, enqueue_many_sync, job};
use jobs_tests::app::{AppError, Rollback, Welcome, welcome};
use jobs_tests::wait_for;
use serde::{Deserialize, Serialize};

/// Sends the welcome mail.
#[job(queue = "mail", max_attempts = 5, timeout = "30s", priority = 2, tags = ["onboarding"])]
async fn send_welcome(_ctx: JobContext, args: Welcome) -> Result<String, std::io::Error> {
    Ok(format!("sent to {}", args.email))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sync {
    account: i64,
}

#[job(kind = "accounts.sync", unique(fields(account), states(available, scheduled, running, retryable)))]
async fn sync_account(_ctx: JobContext, _args: Sync) -> Result<Outcome, std::io::Error> {
    Ok(Outcome::Complete(()))
}

#[derive(diesel::QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

const CREATE_USERS: &str = "CREATE TABLE users (id BIGINT PRIMARY KEY, email VARCHAR(255) NOT NULL)";

async fn ids(conn: &mut AsyncMysqlConnection, sql: &str) -> Vec<i64> {
    diesel::sql_query(sql).load::<Id>(conn).await.expect("ids").into_iter().map(|r| r.id).collect()
}

/// More than one statement's worth of rows (100): all-or-nothing with the transaction.
const BATCH: i64 = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_mysql_connection_enqueues_inside_its_transaction_and_a_worker_runs_the_jobs() {
    let db = MysqlTestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    diesel::sql_query(CREATE_USERS).execute(&mut conn).await.expect("create users");

    let rolled_back: Result<(), AppError> = conn
        .transaction(async |tx| {
            diesel::sql_query("INSERT INTO users VALUES (1, 'a@example.com')").execute(tx).await?;
            send_welcome::enqueue(&mut *tx, welcome(1)).await?;
            enqueue_many(&mut *tx, (100..100 + BATCH).map(|i| send_welcome::build(welcome(i)))).await?;
            assert_eq!(ids(tx, "SELECT id FROM jobs").await.len() as i64, BATCH + 1, "visible inside");
            Err(Rollback.into())
        })
        .await;
    assert!(matches!(rolled_back, Err(AppError::Rule(Rollback))));
    assert!(ids(&mut conn, "SELECT id FROM users").await.is_empty());
    assert!(ids(&mut conn, "SELECT id FROM jobs").await.is_empty(), "the jobs rolled back with the user");

    let committed: Vec<i64> = conn
        .transaction::<_, AppError, _>(async |tx| {
            diesel::sql_query("INSERT INTO users VALUES (2, 'b@example.com')").execute(tx).await?;
            let one = send_welcome::build(welcome(2))
                .queue("mail-eu")
                .meta("request_id", "req-9")
                .enqueue(&mut *tx)
                .await?;
            let many =
                enqueue_many(&mut *tx, (200..200 + BATCH).map(|i| send_welcome::build(welcome(i)))).await?;
            Ok(std::iter::once(one.id).chain(many.iter().map(|e| e.id)).collect())
        })
        .await
        .expect("commit");
    assert_eq!(ids(&mut conn, "SELECT id FROM jobs ORDER BY id").await, committed, "in input order");
    assert_eq!(ids(&mut conn, "SELECT id FROM users").await, vec![2]);
    let first = jobs_core::get_job(&mut conn, committed[0]).await.expect("get").expect("the job");
    assert_eq!((first.queue.as_str(), first.state, first.priority), ("mail-eu", JobState::Available, 2));
    assert_eq!(first.meta, serde_json::json!({"request_id": "req-9"}));
    assert_eq!(first.tags, vec!["onboarding".to_owned()]);
    let last =
        jobs_core::get_job(&mut conn, committed[committed.len() - 1]).await.expect("get").expect("job");
    let args: Welcome = serde_json::from_value(last.args).expect("args decode");
    assert_eq!(args, welcome(200 + BATCH - 1));

    let worker = Worker::builder(db.driver(6).expect("driver"))
        .queue("mail", 20)
        .queue("mail-eu", 5)
        // send_welcome's queue is "mail"; "mail-eu" gets its jobs by a per-call override.
        .allow_queues_without_jobs()
        .registry(Registry::from_inventory().expect("registry"))
        .build()
        .expect("worker")
        .start()
        .await
        .expect("start");
    let driver = db.driver(1).expect("driver");
    let done = wait_for("every committed job completed", Duration::from_secs(60), || async {
        let mut conn = jobs_core::mysql::connect(db.url()).await.ok()?;
        let completed = diesel::sql_query("SELECT id FROM jobs WHERE state = 'completed' ORDER BY id")
            .load::<Id>(&mut conn)
            .await
            .ok()?;
        (completed.len() == committed.len()).then_some(completed.len())
    })
    .await;
    assert_eq!(done, committed.len());
    worker.shutdown().await.expect("shutdown");
    drop(driver);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_mysql_connection_enqueues_inside_its_transaction() {
    let db = MysqlTestDatabase::new().await.expect("test database");
    let url = db.url().to_owned();
    let (committed, unique) = tokio::task::spawn_blocking(move || {
        let mut conn = diesel::MysqlConnection::establish(&url).expect("sync connect");
        diesel::RunQueryDsl::execute(diesel::sql_query(CREATE_USERS), &mut conn).expect("create users");

        let rolled_back = conn.transaction::<(), AppError, _>(|tx| {
            diesel::RunQueryDsl::execute(
                diesel::sql_query("INSERT INTO users VALUES (1, 'a@example.com')"),
                tx,
            )?;
            send_welcome::enqueue_sync(tx, welcome(1))?;
            enqueue_many_sync(tx, (100..100 + BATCH).map(|i| send_welcome::build(welcome(i))))?;
            Err(Rollback.into())
        });
        assert!(matches!(rolled_back, Err(AppError::Rule(Rollback))), "{rolled_back:?}");

        let committed = conn
            .transaction::<Vec<i64>, AppError, _>(|tx| {
                diesel::RunQueryDsl::execute(
                    diesel::sql_query("INSERT INTO users VALUES (2, 'b@example.com')"),
                    tx,
                )?;
                let one = send_welcome::build(welcome(2)).queue("mail-eu").enqueue_sync(tx)?;
                let many =
                    enqueue_many_sync(tx, (200..200 + BATCH).map(|i| send_welcome::build(welcome(i))))?;
                Ok(std::iter::once(one.id).chain(many.iter().map(|e| e.id)).collect())
            })
            .expect("commit");

        // A uniqueness key held by a committed job returns that job.
        let unique = conn
            .transaction::<_, AppError, _>(|tx| {
                let first = sync_account::enqueue_sync(tx, Sync { account: 7 })?;
                let again = sync_account::enqueue_sync(tx, Sync { account: 7 })?;
                Ok((first, again))
            })
            .expect("commit");
        (committed, unique)
    })
    .await
    .expect("blocking task");

    let mut conn = db.connect().await.expect("connect");
    let all = ids(&mut conn, "SELECT id FROM jobs WHERE kind <> 'accounts.sync' ORDER BY id").await;
    assert_eq!(all, committed, "only the committed jobs exist, in input order");
    assert_eq!(ids(&mut conn, "SELECT id FROM users").await, vec![2]);
    let first = jobs_core::get_job(&mut conn, committed[0]).await.expect("get").expect("the job");
    assert_eq!((first.queue.as_str(), first.state), ("mail-eu", JobState::Available));
    let (first, again) = unique;
    assert!(!first.existing && again.existing, "{first:?} then {again:?}");
    assert_eq!(first.id, again.id);
}
