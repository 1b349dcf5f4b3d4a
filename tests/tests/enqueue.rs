//! Defining jobs with `#[job]` and enqueueing them inside the caller's transaction, on
//! async and sync diesel connections.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use futures::StreamExt;
use jobs_core::postgres::connection::insert_many;
use jobs_core::schema::jobs;
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

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_jobs_go_in_one_statement_in_input_order() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let requests: Vec<_> = (0..10_000).map(|i| send_welcome::build(welcome(i))).collect();
    let enqueued =
        conn.transaction(async |tx| enqueue_many(&mut *tx, requests).await).await.expect("enqueue 10,000");
    assert_eq!(enqueued.len(), 10_000);
    assert!(enqueued.windows(2).all(|w| w[0].id < w[1].id), "ids follow the input order");

    let rows = all_jobs(&mut conn).await;
    assert_eq!(rows.len(), 10_000);
    for (i, (row, e)) in rows.iter().zip(&enqueued).enumerate() {
        assert_eq!(row.id, e.id);
        assert_eq!(row.args["user_id"], serde_json::json!(i), "row {i} holds input {i}");
    }
}

/// A batch whose jobs differ only in their arguments goes in as one statement with the
/// shared options sent once; a mixed batch sends every column as an array. Both must store
/// the same rows, due times included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniform_and_mixed_batches_store_the_same_rows() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let now = chrono::Utc::now();
    let build = |user_id| {
        send_welcome::build(welcome(user_id))
            .queue("vip")
            .priority(3)
            .max_attempts(7)
            .timeout(Some(Duration::from_secs(9)))
            .run_in(Duration::from_secs(60))
            .meta("request_id", "r-1")
            .tag("signup")
            .tag("web")
            .to_new_job()
            .expect("valid")
    };
    let uniform: Vec<NewJob> = (1..=3).map(build).collect();
    let mut mixed = uniform.clone();
    mixed.push(NewJob::new("other.kind", "default", "{}"));

    insert_many(&mut conn, &uniform, Some(now)).await.expect("uniform batch");
    insert_many(&mut conn, &mixed, Some(now)).await.expect("mixed batch");
    let rows = all_jobs(&mut conn).await;
    assert_eq!(rows.len(), 7);
    let (first, second) = (&rows[0..3], &rows[3..6]);
    for (a, b) in first.iter().zip(second) {
        assert_eq!(JobRow { id: b.id, ..a.clone() }, *b, "the same job stored two ways");
    }
    let row = &rows[0];
    assert_eq!(
        (row.state, row.queue.as_str(), row.priority, row.max_attempts),
        (JobState::Scheduled, "vip", 3, 7)
    );
    assert_eq!(row.timeout_ms, Some(9_000));
    assert_eq!(row.tags, ["onboarding", "signup", "web"], "the kind's tag and the call's");
    assert_eq!(row.meta["request_id"], "r-1");
    assert_eq!(row.args["user_id"], 1);
    assert_eq!(row.scheduled_at, row.created_at + chrono::TimeDelta::seconds(60));
    assert_eq!(rows[6].state, JobState::Available, "the odd one out is due now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_options_override_the_kinds_defaults() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut conn = db.connect().await.expect("connect");

    let later = send_welcome::build(welcome(1))
        .queue("mail-bulk")
        .priority(-3)
        .max_attempts(1)
        .timeout(None)
        .run_in(Duration::from_secs(3600))
        .tag("campaign:42")
        .meta("user_id", 1)
        .enqueue(&pool)
        .await
        .expect("enqueue");
    let at = chrono::Utc::now() + chrono::Duration::days(2);
    let dated = send_welcome::build(welcome(2)).run_at(at).enqueue(&pool).await.expect("enqueue");

    let row = jobs_core::get_job(&mut conn, later.id).await.expect("get").expect("row");
    assert_eq!(row.state, JobState::Scheduled);
    assert_eq!(
        (row.queue.as_str(), row.priority, row.max_attempts, row.timeout_ms),
        ("mail-bulk", -3, 1, None)
    );
    assert_eq!(row.tags, vec!["campaign:42".to_owned(), "onboarding".to_owned()]);
    let delay = row.scheduled_at - row.created_at;
    assert_eq!(delay.num_seconds(), 3600, "run_in counts from the insert on the database clock");

    let row = jobs_core::get_job(&mut conn, dated.id).await.expect("get").expect("row");
    assert_eq!(row.state, JobState::Scheduled);
    assert_eq!(row.scheduled_at.timestamp_micros(), at.timestamp_micros());

    let options = send_welcome::options();
    assert!(matches!(
        options.backoff,
        Backoff::Exponential { base, max } if base == Duration::from_secs(2) && max == Duration::from_secs(600)
    ));
    assert_eq!(<nightly_cleanup as Job>::options().queue, "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_typed_error_and_inserts_nothing() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut conn = db.connect().await.expect("connect");

    let huge = Welcome { user_id: 1, email: "x".repeat(jobs_core::MAX_PAYLOAD_BYTES) };
    let err = send_welcome::enqueue(&pool, huge).await.expect_err("too large");
    assert!(
        matches!(err, Error::PayloadTooLarge { ref kind, .. } if kind == "enqueue::send_welcome"),
        "{err}"
    );

    let err = send_welcome::build(welcome(1)).queue("").enqueue(&pool).await.expect_err("empty queue");
    assert!(matches!(err, Error::InvalidOption { option: "queue", .. }), "{err}");
    let err = send_welcome::build(welcome(1)).tag("no spaces").enqueue(&pool).await.expect_err("bad tag");
    assert!(matches!(err, Error::InvalidOption { option: "tag", .. }), "{err}");
    let err = send_welcome::build(welcome(1)).max_attempts(0).enqueue(&pool).await.expect_err("no attempts");
    assert!(matches!(err, Error::InvalidOption { option: "max_attempts", .. }), "{err}");

    // One bad job in a batch rejects the batch before anything is written.
    let batch = vec![send_welcome::build(welcome(1)), send_welcome::build(welcome(2)).queue("")];
    assert!(enqueue_many(&pool, batch).await.is_err());

    // Rows built by hand get the same checks, in code: the table only checks finish times.
    let raw = || NewJob::new("raw.kind", "default", "{}");
    let cases: [(NewJob, &str); 5] = [
        (NewJob { kind: "".into(), ..raw() }, "kind"),
        (NewJob { kind: "k".repeat(256).into(), ..raw() }, "kind"),
        (NewJob { queue: "q".repeat(129).into(), ..raw() }, "queue"),
        (NewJob { max_attempts: 0, ..raw() }, "max_attempts"),
        (NewJob { timeout_ms: Some(0), ..raw() }, "timeout"),
    ];
    for (job, expected) in cases {
        let err = enqueue_many(&pool, [raw(), job]).await.expect_err(expected);
        assert!(
            matches!(err, Error::InvalidOption { option, .. } if option == expected),
            "{expected}: {err}"
        );
    }
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM jobs").await, 0);
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
