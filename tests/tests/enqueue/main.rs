//! Defining jobs with `#[job]` and enqueueing them inside the caller's transaction, on
//! async and sync diesel connections. Batches, per-call options and bad input: `batches.rs`.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures::StreamExt;
use jobs_core::driver::rows::Count;
use jobs_core::postgres::connection::insert_many;
use jobs_core::postgres::schema::jobs;
use jobs_core::testing::{TestDatabase, job_context};
use jobs_core::{
    Backoff, EnqueueRequest, Error, Job, JobContext, JobExt, JobState, Outcome, Registry, RunOutcome,
    enqueue_many, enqueue_many_sync, job,
};
use jobs_core::{JobRow, NewJob};
use jobs_tests::app::{AppError, Rollback, Welcome, welcome};
use serde::{Deserialize, Serialize};

/// Sends the welcome mail.
#[job(queue = "mail", max_attempts = 5, timeout = "30s", priority = 2, tags = ["onboarding"],
      backoff = exponential(base = "2s", max = "10m"))]
async fn send_welcome(ctx: JobContext, args: Welcome) -> Result<String, std::io::Error> {
    Ok(format!("sent to {} on {}", args.email, ctx.queue()))
}

mod batches;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sync {
    account: i64,
    full: bool,
}

#[job(kind = "accounts.sync", unique(fields(account), states(available, scheduled, running, retryable)))]
async fn sync_account(_ctx: JobContext, _args: Sync) -> Result<Outcome, std::io::Error> {
    Ok(Outcome::Complete(()))
}

#[job]
async fn nightly_cleanup(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

/// A job defined as a type, for users who prefer `impl Job` to `#[job]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Reindex {
    index: String,
}

impl Job for Reindex {
    const KIND: &'static str = "search.reindex";
    type Args = Self;
    type Output = usize;
    type Error = std::io::Error;

    fn options() -> jobs_core::JobOptions {
        jobs_core::JobOptions::new().queue("search").max_attempts(2)
    }

    async fn run(_ctx: JobContext, args: Self) -> Result<usize, std::io::Error> {
        Ok(args.index.len())
    }
}

jobs_core::register_job!(Reindex);

async fn create_users_table(conn: &mut AsyncPgConnection) {
    diesel::sql_query("CREATE TABLE users (id bigint PRIMARY KEY, email text NOT NULL)")
        .execute(conn)
        .await
        .expect("create users");
}

async fn count(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql).get_result::<Count>(conn).await.expect("count").n
}

async fn all_jobs(conn: &mut AsyncPgConnection) -> Vec<JobRow> {
    let ids: Vec<i64> = jobs::table.select(jobs::id).order(jobs::id).load(conn).await.expect("load ids");
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        rows.push(jobs_core::get_job(conn, id).await.expect("get").expect("the job"));
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_in_a_rolled_back_transaction_never_existed_and_wakes_nobody() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    create_users_table(&mut conn).await;

    // A listener, as workers hold: nothing may arrive for the rolled-back insert.
    let mut listener = db.connect().await.expect("listener");
    diesel::sql_query("LISTEN jobs_available").execute(&mut listener).await.expect("listen");
    let mut notifications = std::pin::pin!(listener.notifications_stream());

    let rolled_back: Result<(), AppError> = conn
        .transaction(async |tx| {
            diesel::sql_query("INSERT INTO users VALUES (1, 'a@example.com')").execute(tx).await?;
            let enqueued = send_welcome::enqueue(&mut *tx, welcome(1)).await?;
            assert!(enqueued.id > 0);
            assert_eq!(
                count(tx, "SELECT count(*) AS n FROM jobs").await,
                1,
                "visible inside the transaction"
            );
            Err(Rollback.into())
        })
        .await;
    assert!(matches!(rolled_back, Err(AppError::Rule(Rollback))));
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM users").await, 0);
    assert_eq!(
        count(&mut conn, "SELECT count(*) AS n FROM jobs").await,
        0,
        "the job rolled back with the user"
    );

    // A marker sent after the rollback must be the first thing the listener sees.
    diesel::sql_query("NOTIFY jobs_available, 'marker'").execute(&mut conn).await.expect("notify");
    let first = tokio::time::timeout(Duration::from_secs(10), notifications.next())
        .await
        .expect("a notification within 10 s")
        .expect("stream open")
        .expect("notification");
    assert_eq!(first.payload, "marker", "the rolled-back insert must not have notified");

    let committed: Result<i64, AppError> = conn
        .transaction(async |tx| {
            diesel::sql_query("INSERT INTO users VALUES (2, 'b@example.com')").execute(tx).await?;
            Ok(send_welcome::enqueue(&mut *tx, welcome(2)).await?.id)
        })
        .await;
    let id = committed.expect("commit");
    let woke = tokio::time::timeout(Duration::from_secs(10), notifications.next())
        .await
        .expect("a notification within 10 s")
        .expect("stream open")
        .expect("notification");
    assert_eq!(woke.payload, "mail", "commit wakes the job's queue");

    let rows = all_jobs(&mut conn).await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.id, id);
    assert_eq!(row.kind, "enqueue::send_welcome");
    assert_eq!(row.queue, "mail");
    assert_eq!(row.state, JobState::Available);
    assert_eq!(row.priority, 2);
    assert_eq!(row.max_attempts, 5);
    assert_eq!(row.timeout_ms, Some(30_000));
    assert_eq!(row.tags, vec!["onboarding".to_owned()]);
    assert_eq!(row.attempt, 0);
    let args: Welcome = serde_json::from_value(row.args.clone()).expect("args decode");
    assert_eq!(args, welcome(2));
}

/// Through a pool the insert commits alone and a second statement wakes the queue: only
/// queues that received available jobs, never for a job due later, and never before the
/// rows are visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueueing_through_a_pool_wakes_the_queue_after_the_insert_commits() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut listener = db.connect().await.expect("listener");
    diesel::sql_query("LISTEN jobs_available").execute(&mut listener).await.expect("listen");
    let mut notifications = std::pin::pin!(listener.notifications_stream());
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(10), notifications.next())
            .await
            .expect("a notification within 10 s")
            .expect("stream open")
            .expect("notification")
            .payload
    };

    let later = send_welcome::build(welcome(1)).run_in(Duration::from_secs(3600));
    assert!(!later.enqueue(&pool).await.expect("enqueue later").existing);
    let mut conn = db.connect().await.expect("connect");
    diesel::sql_query("NOTIFY jobs_available, 'marker'").execute(&mut conn).await.expect("notify");
    assert_eq!(next().await, "marker", "a job due in an hour wakes nobody");

    let id = send_welcome::enqueue(&pool, welcome(2)).await.expect("enqueue").id;
    assert_eq!(next().await, "mail", "the job's queue is woken");
    // The wake-up follows the commit: the row is there for whoever it woke.
    let row = jobs_core::get_job(&mut conn, id).await.expect("get").expect("the job is visible");
    assert_eq!(row.state, JobState::Available);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_pg_connection_enqueues_inside_its_transaction() {
    let db = TestDatabase::new().await.expect("test database");
    let url = db.url().to_owned();
    let ids = tokio::task::spawn_blocking(move || {
        let mut conn = diesel::PgConnection::establish(&url).expect("sync connect");
        let create = diesel::sql_query("CREATE TABLE users (id bigint PRIMARY KEY, email text NOT NULL)");
        diesel::RunQueryDsl::execute(create, &mut conn).expect("create users");

        let rolled_back = conn.transaction::<(), AppError, _>(|tx| {
            diesel::RunQueryDsl::execute(
                diesel::sql_query("INSERT INTO users VALUES (1, 'a@example.com')"),
                tx,
            )?;
            send_welcome::enqueue_sync(tx, welcome(1))?;
            Err(Rollback.into())
        });
        assert!(matches!(rolled_back, Err(AppError::Rule(Rollback))));

        conn.transaction::<Vec<i64>, AppError, _>(|tx| {
            diesel::RunQueryDsl::execute(
                diesel::sql_query("INSERT INTO users VALUES (2, 'b@example.com')"),
                tx,
            )?;
            let one = send_welcome::build(welcome(2))
                .queue("mail-eu")
                .meta("request_id", "req-9")
                .enqueue_sync(tx)?;
            let many = enqueue_many_sync(tx, (10..13).map(|i| send_welcome::build(welcome(i))))?;
            Ok(std::iter::once(one.id).chain(many.iter().map(|e| e.id)).collect())
        })
        .expect("commit")
    })
    .await
    .expect("blocking task");

    let mut conn = db.connect().await.expect("connect");
    let rows = all_jobs(&mut conn).await;
    assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids, "only the committed jobs exist");
    assert_eq!(rows[0].queue, "mail-eu");
    assert_eq!(rows[0].meta, serde_json::json!({"request_id": "req-9"}));
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM users").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unique_job_returns_the_existing_id_until_that_job_leaves_its_unique_states() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut conn = db.connect().await.expect("connect");

    let first = sync_account::enqueue(&pool, Sync { account: 7, full: false }).await.expect("first");
    assert!(!first.existing);
    // Same account, different other field: `fields(account)` makes it a duplicate.
    let again = sync_account::enqueue(&mut conn, Sync { account: 7, full: true }).await.expect("again");
    assert_eq!((again.id, again.existing), (first.id, true));
    let other = sync_account::enqueue(&pool, Sync { account: 8, full: false }).await.expect("other");
    assert!(!other.existing);
    assert_ne!(other.id, first.id);

    // Duplicates inside one batch resolve to one row.
    let batch =
        enqueue_many(&pool, [9, 9, 7].map(|account| sync_account::build(Sync { account, full: false })))
            .await
            .expect("batch");
    assert!(!batch[0].existing);
    assert_eq!((batch[1].id, batch[1].existing), (batch[0].id, true));
    assert_eq!((batch[2].id, batch[2].existing), (first.id, true));
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM jobs").await, 3);

    // Once the job completes, the key is free again.
    diesel::update(jobs::table.find(first.id))
        .set((jobs::state.eq(JobState::Completed), jobs::finalized_at.eq(diesel::dsl::now)))
        .execute(&mut conn)
        .await
        .expect("complete");
    let after = sync_account::enqueue(&pool, Sync { account: 7, full: false }).await.expect("after");
    assert!(!after.existing);
    assert_ne!(after.id, first.id);

    // A per-call key makes any kind unique for that call.
    let keyed = nightly_cleanup::build(()).unique_key("2026-11-22").enqueue(&pool).await.expect("keyed");
    let keyed_again =
        nightly_cleanup::build(()).unique_key("2026-11-22").enqueue(&pool).await.expect("again");
    assert_eq!((keyed_again.id, keyed_again.existing), (keyed.id, true));
    let unkeyed = nightly_cleanup::enqueue(&pool, ()).await.expect("unkeyed");
    assert!(!unkeyed.existing);
}

#[tokio::test]
async fn the_registry_runs_handlers_from_stored_arguments_and_rejects_bad_ones() {
    let registry = Registry::from_inventory().expect("no duplicate kinds");
    assert!(registry.kinds().contains(&"enqueue::send_welcome"));
    assert!(registry.kinds().contains(&"accounts.sync"));
    let descriptor = registry.get("enqueue::send_welcome").expect("registered");

    let args = serde_json::value::to_raw_value(&welcome(5)).expect("encode");
    let outcome = (descriptor.run)(job_context::<send_welcome>(None), &args).await;
    assert_eq!(outcome, RunOutcome::Completed(Some("\"sent to user5@example.com on mail\"".into())));

    let bad = serde_json::value::RawValue::from_string(r#"{"user_id":"five"}"#.into()).expect("json");
    match (descriptor.run)(job_context::<send_welcome>(None), &bad).await {
        RunOutcome::Discarded(failure) => {
            assert_eq!(failure.error_type, "invalid_args");
            assert!(failure.message.contains("Welcome"), "{}", failure.message);
        }
        other => panic!("expected a discard, got {other:?}"),
    }

    // The handler is also callable directly.
    let text = send_welcome::call(job_context::<send_welcome>(None), welcome(6)).await.expect("call");
    assert_eq!(text, "sent to user6@example.com on mail");
    assert_eq!(
        EnqueueRequest::<send_welcome>::new(welcome(1)).to_new_job().expect("row").kind,
        "enqueue::send_welcome"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_defined_as_a_type_shares_the_registry_and_the_enqueue_api() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let enqueued = Reindex::enqueue(&pool, Reindex { index: "products".into() }).await.expect("enqueue");
    let mut conn = db.connect().await.expect("connect");
    let row = jobs_core::get_job(&mut conn, enqueued.id).await.expect("get").expect("row");
    assert_eq!((row.kind.as_str(), row.queue.as_str(), row.max_attempts), ("search.reindex", "search", 2));

    let registry = Registry::from_inventory().expect("registry");
    let descriptor = registry.get("search.reindex").expect("registered by register_job!");
    let args = serde_json::value::to_raw_value(&row.args).expect("raw");
    let outcome = (descriptor.run)(job_context::<Reindex>(None), &args).await;
    assert_eq!(outcome, RunOutcome::Completed(Some("8".into())));
}
