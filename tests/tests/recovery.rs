//! A worker that cannot run what it would claim: it says what it serves, refuses to start
//! when a queue it serves has no registered job (the binary did not link the crate that
//! defines them), and hands a job of a kind it does not know back for another node without
//! using up an attempt, for a bounded time. Nodes advertise the kinds they know, so the
//! dashboard can say who can run a job. (The recovery of dead nodes and leaders is in the
//! conformance suite; the churn test measures it.)

use std::time::Duration;

use jobs_core::driver::{JobGetParams, JobInsertManyParams, NodeListParams};
use jobs_core::testing::SqliteTestDatabase;
use jobs_core::{Error, IntoDriver, JobState, NewJob, Registry, UnknownKindPolicy, Worker};
use jobs_tests::conformance::registry;
use jobs_tests::wait_for;

const DEADLINE: Duration = Duration::from_secs(30);

fn lazy_pool() -> jobs_core::postgres::Pool {
    jobs_core::postgres::pool("postgres://nobody@127.0.0.1:1/nothing", 1).expect("a lazy pool")
}

#[test]
fn a_worker_with_no_registered_job_refuses_to_start_and_says_why() {
    let refused = Worker::builder(lazy_pool()).queue("mailers", 4).registry(Registry::new()).build();
    let Err(e @ Error::NoJobsForQueue { .. }) = refused else {
        panic!("expected NoJobsForQueue, got {refused:?}")
    };
    let message = e.to_string();
    println!("{message}");
    assert_eq!(
        message,
        "the worker serves queue `mailers`, but no registered job runs on it (no job is registered at all); \
         link the crate that defines its jobs into this binary (the `#[job]` functions register themselves \
         only when linked), or call `.allow_queues_without_jobs()` if its jobs reach it by a per-call \
         `.queue(\"mailers\")`"
    );
}

#[test]
fn a_queue_no_registered_job_names_is_refused_unless_allowed() {
    let refused = Worker::builder(lazy_pool()).queue("work", 4).queue("vip", 2).registry(registry()).build();
    match refused {
        Err(Error::NoJobsForQueue { queue, registered }) => {
            assert_eq!(queue, "vip");
            // Each queue with its jobs, by name (the suite's registry grows: only what
            // this test needs is named).
            assert!(
                registered.contains("`work`: conformance.behave, conformance.daily_report, "),
                "{registered}"
            );
            assert!(registered.contains("`periodic`: conformance.tick"), "{registered}");
            assert!(!registered.contains("vip"), "{registered}");
        }
        other => panic!("expected NoJobsForQueue, got {other:?}"),
    }
    Worker::builder(lazy_pool())
        .queue("work", 4)
        .queue("vip", 2)
        .registry(registry())
        .allow_queues_without_jobs()
        .build()
        .expect("allowed");
}

/// A worker on queue `work` that hands unknown kinds back every 100 ms until they are
/// `give_up_after` old.
async fn handing_back(
    driver: &std::sync::Arc<dyn jobs_core::driver::Driver>,
    give_up_after: Duration,
) -> jobs_core::WorkerHandle {
    Worker::builder(driver.clone())
        .queue("work", 2)
        .registry(registry())
        .poll_interval(Duration::from_millis(50))
        .unknown_kinds(UnknownKindPolicy::HandBack { retry_in: Duration::from_millis(100), give_up_after })
        .build()
        .expect("build")
        .start()
        .await
        .expect("start")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_of_an_unknown_kind_goes_back_without_using_an_attempt_then_fails_when_too_old() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver").into_driver();
    let insert = |kind: &str| NewJob::new(kind, "work", "{}");
    let unknown = driver
        .job_insert_many(JobInsertManyParams { jobs: &[insert("newer.deploy.kind")], now: None })
        .await
        .expect("insert")[0]
        .id;
    let worker = handing_back(&driver, Duration::from_secs(3600)).await;
    // Claimed and handed back again and again, never using an attempt or adding an error.
    let row = wait_for("three hand-backs", DEADLINE, || async {
        let row = driver.job_get(JobGetParams { id: unknown }).await.ok()??;
        (row.attempted_by.len() >= 3 && row.state != JobState::Running).then_some(row)
    })
    .await;
    assert_eq!(row.attempt, 0, "{row:?}");
    assert!(row.errors.as_array().is_some_and(|e| e.is_empty()), "{row:?}");
    assert!(matches!(row.state, JobState::Scheduled | JobState::Available), "{row:?}");
    // The node says what it can run.
    let nodes = driver.node_list(NodeListParams {}).await.expect("nodes");
    assert!(nodes[0].can_run("work", "conformance.record"));
    assert!(!nodes[0].can_run("work", "newer.deploy.kind"));
    worker.shutdown().await.expect("shutdown");

    // Once the job is older than the bound, its attempt fails like any error.
    let worker = handing_back(&driver, Duration::from_millis(1)).await;
    let row = wait_for("the attempt to fail", DEADLINE, || async {
        let row = driver.job_get(JobGetParams { id: unknown }).await.ok()??;
        (row.attempt == 1 && row.state != JobState::Running).then_some(row)
    })
    .await;
    assert_eq!(row.errors[0]["error_type"], "unknown_kind", "{row:?}");
    worker.shutdown().await.expect("shutdown");
}
