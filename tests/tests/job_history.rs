//! What a job's history records, and what a handler's panic prints.
//!
//! - A panic in a handler is caught and stored as the attempt's error, with its backtrace;
//!   it is not printed to stderr as if the process were crashing (the panic hook that was
//!   installed before the worker's is not called). A panic elsewhere still reaches it.
//! - A snooze is recorded in the job's `errors` entries (the dashboard's timeline shows
//!   it), marked as a snooze, with when the job is due again; a failure that will be retried
//!   records when the retry is due.
//!
//! Its own test binary: the panic hook is process-wide.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jobs_core::driver::{Driver, JobGetParams};
use jobs_core::testing::{SqliteTestDatabase, drain_queue};
use jobs_core::{JobContext, JobRow, JobState, Outcome, job};

#[job(kind = "history.explode", queue = "history_panics", max_attempts = 3, backoff = constant("1h"))]
async fn explode(_ctx: JobContext, order: i64) -> Result<(), std::io::Error> {
    panic!("order {order} is malformed");
}

#[job(kind = "history.later", queue = "history_snoozes", max_attempts = 3)]
async fn later(_ctx: JobContext, _n: i64) -> Result<Outcome, std::io::Error> {
    Ok(Outcome::snooze(Duration::from_secs(90)))
}

/// The worker's clock and the database's agree to well within a second here.
fn close(a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>) -> bool {
    (a - b).abs() < chrono::TimeDelta::seconds(1)
}

static SPINS: AtomicUsize = AtomicUsize::new(0);

/// Snoozes (for no time) 30 times, then completes.
#[job(kind = "history.spin", queue = "history_spins", max_attempts = 1)]
async fn spin(_ctx: JobContext, _n: i64) -> Result<Outcome, std::io::Error> {
    if SPINS.fetch_add(1, Ordering::SeqCst) < 30 {
        return Ok(Outcome::snooze(Duration::ZERO));
    }
    Ok(Outcome::Complete(()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_snoozes_again_and_again_keeps_a_bounded_history() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(2).expect("driver");
    let id = spin::enqueue(&driver, 1).await.expect("enqueue").id;
    let ran = drain_queue(driver.clone(), "history_spins").await.expect("drain");
    assert_eq!(ran.len(), 31, "30 snoozes, then the run that completes");
    let row = driver.job_get(JobGetParams { id }).await.expect("read").expect("the job");
    assert_eq!(
        (row.state, row.attempt, row.max_attempts),
        (JobState::Completed, 31, 31),
        "each snooze allows one more attempt (its one attempt is not used up), and no attempt number runs twice"
    );
    let entries = row.errors.as_array().map(Vec::len);
    assert_eq!(entries, Some(jobs_core::driver::MAX_GIVEN_BACK_ENTRIES), "bounded, not 30");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_panic_is_recorded_not_printed_and_a_snooze_is_in_the_history() {
    // A hook standing for the default one, which prints "thread '…' panicked at …".
    let printed = Arc::new(AtomicUsize::new(0));
    let seen = printed.clone();
    std::panic::set_hook(Box::new(move |info| {
        seen.fetch_add(1, Ordering::SeqCst);
        eprintln!("{info}");
    }));

    // What the worker logs, as an application's subscriber would print it.
    let logged = jobs_tests::log_sink::LogSink::install_global();

    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(2).expect("driver");
    let panicking = explode::enqueue(&driver, 7).await.expect("enqueue").id;
    let ran = drain_queue(driver.clone(), "history_panics").await.expect("drain");
    assert_eq!(ran.len(), 1);
    let row = driver.job_get(JobGetParams { id: panicking }).await.expect("read").expect("the job");
    assert_eq!(row.state, JobState::Retryable);
    let entry = &row.errors[0];
    assert_eq!(entry["error_type"], "panic");
    assert!(entry["message"].as_str().is_some_and(|m| m.contains("order 7 is malformed")), "{entry}");
    assert!(entry["backtrace"].as_str().is_some_and(|b| !b.is_empty()), "the backtrace is kept: {entry}");
    let retry_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(entry["retry_at"].clone()).expect("a failure that is retried says when");
    assert!(
        close(retry_at, row.scheduled_at),
        "the retry is due when the row says: {retry_at} {}",
        row.scheduled_at
    );
    assert_eq!(printed.load(Ordering::SeqCst), 0, "a caught panic in a handler is not printed");
    // The log says what failed in one line; the backtrace stays in the job's errors.
    let log = logged.text();
    let line = log.lines().find(|l| l.contains("attempt failed")).expect("the failure is logged");
    assert!(line.contains("order 7 is malformed") && line.contains("error_type=panic"), "{line}");
    assert!(!log.contains("panic_capture") && !log.contains("backtrace"), "no backtrace in the log: {log}");

    // A panic outside any handler still reaches the previous hook.
    let outside = std::thread::spawn(|| panic!("an application bug")).join();
    assert!(outside.is_err());
    assert_eq!(printed.load(Ordering::SeqCst), 1, "other panics are printed as before");

    let snoozing = later::enqueue(&driver, 1).await.expect("enqueue").id;
    let ran = drain_queue(driver.clone(), "history_snoozes").await.expect("drain");
    assert_eq!(ran.iter().map(|d| d.state).collect::<Vec<_>>(), vec![JobState::Scheduled]);
    let row = driver.job_get(JobGetParams { id: snoozing }).await.expect("read").expect("the job");
    assert_eq!(
        (row.state, row.max_attempts - row.attempt),
        (JobState::Scheduled, 3),
        "a snooze does not use up one of its three attempts"
    );
    let entry = &row.errors[0];
    assert_eq!(entry["error_type"], JobRow::SNOOZED);
    assert_eq!(entry["message"], "snoozed for 90s");
    let due: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(entry["retry_at"].clone()).expect("due again");
    assert!(close(due, row.scheduled_at), "{due} {}", row.scheduled_at);
    assert_eq!(row.failures().count(), 0, "a snooze is not a failure");
}
