//! Bad input gets a typed error, loses nothing, and the worker keeps serving: arguments
//! that no longer decode, unknown kinds (both policies), oversized and NUL payloads at
//! enqueue, huge and binary error text, results Postgres could not store, a panic with a
//! huge message, and an invalid cron expression.

use std::time::Duration;

use jobs_core::cron::Periodic;
use jobs_core::postgres::Pool;
use jobs_core::postgres::connection::insert_many;
use jobs_core::stored_text::{MAX_ERROR_MESSAGE_BYTES, MAX_RESULT_BYTES};
use jobs_core::testing::TestDatabase;
use jobs_core::{
    Error, JobContext, JobState, MAX_PAYLOAD_BYTES, Registry, UnknownKindPolicy, Worker, WorkerHandle,
    enqueue_many, job,
};
use jobs_core::{JobRow, NewJob};
use jobs_tests::faults::count;
use jobs_tests::wait_for;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Typed {
    n: i64,
}

#[job(kind = "bad.typed", queue = "bad")]
async fn typed(_ctx: JobContext, args: Typed) -> Result<i64, std::convert::Infallible> {
    Ok(args.n)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Loud {
    Echo(String),
    HugeError,
    BinaryError,
    NulResult,
    HugeResult,
    HugePanic,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct LoudError(String);

#[job(kind = "bad.loud", queue = "bad", max_attempts = 5, backoff = constant("1h"))]
async fn loud(_ctx: JobContext, args: Loud) -> Result<serde_json::Value, LoudError> {
    match args {
        Loud::Echo(text) => Ok(serde_json::Value::String(text)),
        Loud::HugeError => Err(LoudError("e".repeat(10 << 20))),
        // Bytes that are not UTF-8 (and a NUL), as an error built from a C library or a
        // socket would carry them.
        Loud::BinaryError => {
            Err(LoudError(String::from_utf8_lossy(&[0xff, 0x00, 0xfe, b'o', b'k']).into_owned()))
        }
        Loud::NulResult => Ok(serde_json::json!({ "text": "a\0b", "k\0": [1, "\0"] })),
        Loud::HugeResult => Ok(serde_json::Value::String("r".repeat(MAX_RESULT_BYTES + 1))),
        Loud::HugePanic => panic!("{}", "p".repeat(1 << 20)),
    }
}

const DEADLINE: Duration = Duration::from_secs(60);

fn raw(kind: &str, args: &str) -> NewJob {
    NewJob { max_attempts: 3, ..NewJob::new(kind, "bad", args) }
}

async fn insert_raw(pool: &Pool, job: NewJob) -> i64 {
    let mut conn = pool.get().await.expect("connection");
    insert_many(&mut conn, &[job], None).await.expect("insert")[0].id
}

async fn wait_state(pool: &Pool, id: i64, state: JobState) -> JobRow {
    wait_for(&format!("job {id} to become {state}"), DEADLINE, || async {
        let mut conn = pool.get().await.ok()?;
        let row = jobs_core::get_job(&mut conn, id).await.ok()??;
        (row.state == state).then_some(row)
    })
    .await
}

async fn start(pool: &Pool, policy: UnknownKindPolicy) -> WorkerHandle {
    Worker::builder(pool.clone())
        .queue("bad", 4)
        .registry(Registry::from_inventory().expect("registry"))
        .unknown_kinds(policy)
        .poll_interval(Duration::from_millis(100))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start")
}

/// The worker still runs good jobs.
async fn still_serving(pool: &Pool, n: i64) {
    let id = enqueue_many(pool, [typed::build(Typed { n })]).await.expect("enqueue")[0].id;
    let row = wait_state(pool, id, JobState::Completed).await;
    assert_eq!(row.result, Some(serde_json::json!(n)));
}

fn first_error(row: &JobRow) -> &serde_json::Value {
    &row.errors[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_unknown_kinds_are_errored_or_left_alone_never_lost() {
    let logged = jobs_tests::log_sink::LogSink::install_global();
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let worker = start(&pool, UnknownKindPolicy::Fail).await;

    // Arguments that no longer decode: discarded at once (retrying cannot help), kept.
    let id = insert_raw(&pool, raw("bad.typed", r#"{"n":"not a number"}"#)).await;
    let row = wait_state(&pool, id, JobState::Discarded).await;
    assert_eq!(first_error(&row)["error_type"], "invalid_args");
    assert!(first_error(&row)["message"].as_str().is_some_and(|m| m.contains("no longer decode")), "{row:?}");
    still_serving(&pool, 1).await;

    // An unknown kind under the default policy: the attempt fails and will be retried.
    let id = insert_raw(&pool, raw("from.newer.deploy", "{}")).await;
    let row = wait_state(&pool, id, JobState::Retryable).await;
    assert_eq!(first_error(&row)["error_type"], "unknown_kind");
    assert_eq!(row.attempt, 1);
    assert!(row.scheduled_at > row.attempted_at.expect("attempted"), "retried later, on the backoff");
    still_serving(&pool, 2).await;
    worker.shutdown().await.expect("shutdown");

    // An unknown kind under `Postpone`: left for a node that knows it, attempt untouched.
    let worker = start(&pool, UnknownKindPolicy::Postpone(Duration::from_secs(3600))).await;
    let id = insert_raw(&pool, raw("from.newer.deploy", "{}")).await;
    let row = wait_state(&pool, id, JobState::Scheduled).await;
    assert_eq!(row.attempt, 0, "the attempt is given back");
    assert_eq!(first_error(&row)["error_type"], "unknown_kind");
    let delay = row.scheduled_at - row.attempted_at.expect("attempted");
    assert!((delay.num_seconds() - 3600).abs() <= 1, "postponed an hour: {delay}");
    // The log says why, naming the kind, not just "ended state=scheduled".
    let log = logged.text();
    let line = log
        .lines()
        .find(|l| l.contains("no job of this kind is registered on this node"))
        .unwrap_or_else(|| panic!("the hand-back is explained: {log}"));
    assert!(
        line.contains("from.newer.deploy") && line.contains("bad.typed"),
        "the kind and the registered ones: {line}"
    );
    still_serving(&pool, 3).await;
    worker.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_nul_payloads_are_refused_at_enqueue() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
    let err = enqueue_many(&pool, [loud::build(Loud::Echo("x".repeat(MAX_PAYLOAD_BYTES)))])
        .await
        .expect_err("refused");
    assert!(
        matches!(err, Error::PayloadTooLarge { ref kind, limit, .. } if kind == "bad.loud" && limit == MAX_PAYLOAD_BYTES),
        "{err}"
    );
    let err = enqueue_many(&pool, [loud::build(Loud::Echo("a\0b".into()))]).await.expect_err("refused");
    assert!(matches!(err, Error::NulInPayload { what: "arguments", .. }), "{err}");
    assert!(err.to_string().contains("NUL"), "{err}");
    // A batch with one bad job in it inserts none of them.
    let err =
        enqueue_many(&pool, [Loud::Echo("fine".into()), Loud::Echo("\0".into())].map(loud::build)).await;
    assert!(matches!(err, Err(Error::NulInPayload { .. })));
    let mut conn = db.connect().await.expect("connect");
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM jobs").await, 0, "nothing was inserted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_binary_and_unstorable_outcomes_are_stored_clipped_and_the_worker_goes_on() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let worker = start(&pool, UnknownKindPolicy::Fail).await;
    let ids: Vec<i64> = enqueue_many(
        &pool,
        [Loud::HugeError, Loud::BinaryError, Loud::NulResult, Loud::HugeResult, Loud::HugePanic]
            .map(loud::build),
    )
    .await
    .expect("enqueue")
    .iter()
    .map(|e| e.id)
    .collect();

    let huge = wait_state(&pool, ids[0], JobState::Retryable).await;
    let message = first_error(&huge)["message"].as_str().expect("message").to_owned();
    assert!(message.len() < MAX_ERROR_MESSAGE_BYTES + 100, "clipped: {} bytes", message.len());
    assert!(
        message.ends_with(&format!("[cut: {} bytes in all]", 10 << 20)),
        "{}",
        &message[message.len() - 60..]
    );

    let binary = wait_state(&pool, ids[1], JobState::Retryable).await;
    assert_eq!(first_error(&binary)["message"], "\u{FFFD}\u{FFFD}\u{FFFD}ok");

    let nul = wait_state(&pool, ids[2], JobState::Completed).await;
    assert_eq!(nul.result, Some(serde_json::json!({ "text": "a\u{FFFD}b", "k\u{FFFD}": [1, "\u{FFFD}"] })));

    let big = wait_state(&pool, ids[3], JobState::Completed).await;
    let note = big.result.as_ref().and_then(|r| r["result_omitted"].as_str()).expect("a note instead");
    assert!(note.contains("over the 1048576-byte limit"), "{note}");

    let panicked = wait_state(&pool, ids[4], JobState::Retryable).await;
    assert_eq!(first_error(&panicked)["error_type"], "panic");
    let message = first_error(&panicked)["message"].as_str().expect("message");
    assert!(message.len() < MAX_ERROR_MESSAGE_BYTES + 100 && message.contains("[cut:"), "{}", message.len());

    still_serving(&pool, 4).await;
    worker.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_cron_expression_stops_the_worker_from_starting_and_says_which() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let result = Worker::builder(pool)
        .queue("bad", 1)
        .schedule(Periodic::new::<typed>("nightly-typo", "0 0 25 * * *", Typed { n: 1 }))
        .build();
    match result {
        Err(Error::InvalidSchedule { schedule, reason }) => {
            assert_eq!(schedule, "nightly-typo");
            assert!(!reason.is_empty());
        }
        Err(other) => panic!("expected InvalidSchedule, got {other}"),
        Ok(_) => panic!("an invalid cron expression was accepted"),
    }
}

/// A database URL that cannot work says why, and which forms this build reads; the
/// forms other tools accept for SQLite (`sqlite:app.db`) work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_urls_say_what_is_wrong_with_them() {
    let refused = |url: &str| match jobs_core::driver_for_url(url, 1) {
        Ok(_) => panic!("`{url}` was accepted"),
        Err(e) => e.to_string(),
    };
    let no_scheme = refused("app.db");
    assert!(no_scheme.contains("the URL has no scheme") && no_scheme.contains("sqlite://"), "{no_scheme}");
    let quoted = refused(r#""postgres://app:s3cret@db/shop""#);
    assert!(quoted.contains("in quotes") && !quoted.contains("s3cret"), "never echoes the URL: {quoted}");
    let unknown = refused("redis://localhost/0");
    assert!(unknown.contains("no driver for `redis:` URLs") && unknown.contains("postgres://"), "{unknown}");
    let dir = std::env::temp_dir().join(format!("jobs-url-{}", std::process::id()));
    let missing = dir.join("no-such-dir").join("app.db");
    let message = refused(&format!("sqlite://{}", missing.display()));
    assert!(
        message.contains(&missing.display().to_string()) && message.contains("does not exist"),
        "names the file and the missing directory: {message}"
    );
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("app.db");
    let driver =
        jobs_core::driver_for_url(&format!("sqlite:{}", file.display()), 1).expect("sqlite: without //");
    driver.migrate().await.expect("migrate");
    assert!(file.exists());
    let _ = std::fs::remove_dir_all(&dir);

    // A server that is not there: the error names it (not the password) and the cause.
    for (url, says) in [
        (
            "postgres://app:s3cret@127.0.0.1:1/shop",
            "could not connect to Postgres at 127.0.0.1:1 (database `shop`, user `app`)",
        ),
        (
            "mysql://app:s3cret@127.0.0.1:1/shop",
            "could not connect to MySQL/MariaDB at 127.0.0.1:1 (database `shop`)",
        ),
    ] {
        let driver = jobs_core::driver_for_url(url, 1).expect("a driver (connections are made on use)");
        let error = driver.migrate().await.expect_err("nothing listens there").to_string();
        assert!(error.contains(says) && error.contains("refused"), "{error}");
        assert!(!error.contains("s3cret"), "the password stays out: {error}");
    }
}
