//! What a run's end does to its job: retries on the backoff policy, panics, timeouts,
//! snoozes, cancels, discards, results, delete-on-completion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use jobs_core::driver::{JobGetParams, JobState};
use jobs_core::maintenance::{Scheduler, ServiceContext};
use jobs_core::{Clock, ManualClock, QueueConfig, Worker, enqueue_many};

use crate::jobs::{Behaviour, behave};
use crate::{DEADLINE, TestDb, registry};
use jobs_core::testing::wait_for;

/// A failing job retries after 10 s, then 20 s (with up to 10 % jitter), on the injected
/// clock, and is discarded after its third attempt with three error entries.
pub async fn failures_retry_on_the_backoff_policy_then_discard(db: TestDb) {
    let clock = ManualClock::new(Utc::now());
    let handle = db.worker().clock(Arc::new(clock.clone())).without_maintenance().build().expect("build");
    let handle = handle.start().await.expect("start");
    let ctx = ServiceContext::new(db.driver.clone(), "test-scheduler").with_clock(Arc::new(clock.clone()));
    let id = behave::enqueue(&db.driver, Behaviour::Fail).await.expect("enqueue").id;

    // Databases keep microseconds (MariaDB and SQLite less), the test clock nanoseconds: a
    // stored due time may fall short of the exact delay by less than a millisecond.
    const STORED: Duration = Duration::from_millis(1);
    let row = db.wait_state(id, JobState::Retryable).await;
    assert_eq!(row.attempt, 1);
    let delay = (row.scheduled_at - clock.now()).to_std().expect("in the future");
    assert!(
        delay >= Duration::from_secs(10) - STORED && delay <= Duration::from_secs(11),
        "attempt 1 delay {delay:?}"
    );
    assert_eq!(row.errors[0]["message"], "card declined");
    assert_eq!(row.errors[0]["attempt"], 1);
    assert_eq!(row.errors[0]["node"], handle.node());
    assert!(row.errors[0]["error_type"].as_str().is_some_and(|t| t.ends_with("Declined")));

    // Not due yet: the scheduler leaves it.
    assert_eq!(Scheduler::default().run_once(&ctx).await.expect("schedule"), 0);
    clock.advance(Duration::from_secs(12));
    assert_eq!(Scheduler::default().run_once(&ctx).await.expect("schedule"), 1);

    let row = wait_for("attempt 2 to fail", DEADLINE, || async {
        let row = db.driver.job_get(JobGetParams { id }).await.ok()??;
        (row.state == JobState::Retryable && row.attempt == 2).then_some(row)
    })
    .await;
    let delay = (row.scheduled_at - clock.now()).to_std().expect("in the future");
    assert!(
        delay >= Duration::from_secs(20) - STORED && delay <= Duration::from_secs(22),
        "attempt 2 delay {delay:?}"
    );

    clock.advance(Duration::from_secs(23));
    assert_eq!(Scheduler::default().run_once(&ctx).await.expect("schedule"), 1);
    let row = db.wait_state(id, JobState::Discarded).await;
    assert_eq!(row.attempt, 3);
    assert_eq!(row.errors.as_array().map(Vec::len), Some(3));
    assert!(row.finalized_at.is_some());
    handle.shutdown().await.expect("shutdown");
}

/// Each way a run can end is stored: a panic with its backtrace, a timeout, a snooze that
/// gives the attempt back, a cancel and a discard with their reasons, a result.
pub async fn panics_timeouts_snoozes_cancels_and_discards_are_recorded(db: TestDb) {
    let handle = db.worker().without_maintenance().build().expect("build").start().await.expect("start");
    let behaviours = [
        Behaviour::Panic,
        Behaviour::Hang,
        Behaviour::Snooze,
        Behaviour::Cancel,
        Behaviour::Discard,
        Behaviour::Succeed,
    ];
    let ids: Vec<i64> = enqueue_many(&db.driver, behaviours.map(behave::build))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();

    let panicked = db.wait_state(ids[0], JobState::Retryable).await;
    let error = &panicked.errors[0];
    assert_eq!(error["error_type"], "panic");
    assert_eq!(error["message"], "panicked: boom at attempt 1");
    assert!(error["backtrace"].as_str().is_some_and(|b| !b.is_empty()), "backtrace recorded: {error}");

    let started = Instant::now();
    let timed_out = db.wait_state(ids[1], JobState::Retryable).await;
    assert_eq!(timed_out.errors[0]["error_type"], "timeout");
    assert!(timed_out.errors[0]["message"].as_str().is_some_and(|m| m.contains("300ms")));
    assert!(started.elapsed() < Duration::from_secs(30));

    let snoozed = db.wait_state(ids[2], JobState::Scheduled).await;
    assert_eq!(
        (snoozed.attempt, snoozed.max_attempts),
        (1, 4),
        "a snooze does not use up an attempt (one more is allowed); its number is never run again"
    );
    let delay = snoozed.scheduled_at - snoozed.attempted_at.expect("attempted");
    assert!((delay.num_seconds() - 3600).abs() <= 1, "snoozed for an hour: {delay}");

    let cancelled = db.wait_state(ids[3], JobState::Cancelled).await;
    assert_eq!(cancelled.errors[0]["message"], "customer left");
    assert!(cancelled.finalized_at.is_some());
    let discarded = db.wait_state(ids[4], JobState::Discarded).await;
    assert_eq!(discarded.errors[0]["message"], "bad address");
    assert_eq!(discarded.attempt, 1, "discarded at once, attempts left unused");
    let done = db.wait_state(ids[5], JobState::Completed).await;
    assert_eq!(done.result, Some(serde_json::json!("done")));
    assert!(done.errors.as_array().is_some_and(Vec::is_empty));
    handle.shutdown().await.expect("shutdown");
}

/// A delete-on-completion queue removes completed jobs and keeps failed ones.
pub async fn delete_on_completion_leaves_no_row(db: TestDb) {
    let handle = Worker::builder(db.driver.clone())
        .queue_config(QueueConfig::new("work", 5).delete_on_completion())
        .registry(registry())
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let ok = behave::enqueue(&db.driver, Behaviour::Succeed).await.expect("enqueue").id;
    let failing = behave::enqueue(&db.driver, Behaviour::Discard).await.expect("enqueue").id;
    db.wait_state(failing, JobState::Discarded).await;
    wait_for("the completed job to be deleted", DEADLINE, || async {
        db.driver.job_get(JobGetParams { id: ok }).await.ok()?.is_none().then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
}

/// A job whose cancellation was requested while it ran ends cancelled whatever its run
/// asks for — a retry after a failure or a timeout, a snooze, a hand-back at shutdown —
/// except a success, which completes, and a discard, which stands.
pub async fn a_cancel_requested_while_running_wins_over_every_outcome_but_success(db: TestDb) {
    use crate::factory::{JobFactory, insert_all, succeeded};
    use jobs_core::driver::{Completion, JobCompleteManyParams};
    let now = Utc::now();
    let running = || {
        JobFactory::new("conformance.behave")
            .claimed_by("n")
            .state(JobState::Running, now)
            .cancel_requested(now)
    };
    let ids = insert_all(&*db.driver, (0..6).map(|_| running()).collect()).await;
    let entry =
        |kind: &str| Some(serde_json::json!({"attempt": 1, "error_type": kind, "message": kind}).to_string());
    let ended = |id: i64, state: JobState| Completion { state, ..succeeded(id, "work", 1) };
    let batch = [
        Completion { delay_ms: Some(10_000), error: entry("failed"), ..ended(ids[0], JobState::Retryable) },
        Completion { delay_ms: Some(10_000), error: entry("timeout"), ..ended(ids[1], JobState::Retryable) },
        Completion {
            delay_ms: Some(3_600_000),
            give_back_attempt: true,
            error: entry("snoozed"),
            ..ended(ids[2], JobState::Scheduled)
        },
        Completion { give_back_attempt: true, ..ended(ids[3], JobState::Available) },
        ended(ids[4], JobState::Completed),
        Completion { error: entry("bad_input"), ..ended(ids[5], JobState::Discarded) },
    ];
    let mut applied = db
        .driver
        .job_complete_many(JobCompleteManyParams { completions: &batch, now: None })
        .await
        .expect("complete");
    applied.sort_unstable();
    assert_eq!(applied, ids);
    let expected = [
        JobState::Cancelled,
        JobState::Cancelled,
        JobState::Cancelled,
        JobState::Cancelled,
        JobState::Completed,
        JobState::Discarded,
    ];
    for (id, state) in ids.iter().zip(expected) {
        let row = db.job(*id).await;
        assert_eq!(row.state, state, "job {id}");
        assert!(row.finalized_at.is_some(), "job {id} is finished");
    }
}
