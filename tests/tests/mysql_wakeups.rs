//! MariaDB wake-ups: enqueues through the driver ration their `job_notifications` rows (one
//! per queue per window, plus a trailing one) and lose none: a worker of another process,
//! woken by the rows alone, runs every job.

use std::sync::Arc;
use std::time::Duration;

use diesel_async::RunQueryDsl;
use jobs_core::driver::rows::Count;
use jobs_core::testing::MysqlTestDatabase;
use jobs_core::{MysqlDriver, Worker, enqueue_many};
use jobs_tests::conformance::jobs::{Ledger, record};
use jobs_tests::conformance::registry;
use jobs_tests::wait_for;

const DEADLINE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_enqueues_shares_few_wake_up_rows_and_loses_none() {
    let db = MysqlTestDatabase::new().await.expect("test database");
    // The worker's driver has a hub of its own: it hears the enqueues only through the
    // table, as another process would. Its poll is an hour away.
    let other_process =
        MysqlDriver::new(db.pool(6).expect("pool")).notification_poll(Duration::from_millis(20));
    let handle = Worker::builder(other_process)
        .queue("work", 50)
        .registry(registry())
        .poll_interval(Duration::from_secs(3600))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");

    let window = Duration::from_millis(300);
    let enqueuer = Arc::new(db.driver(8).expect("driver").wake_window(window));
    let ledger = Ledger::new();
    let release = Arc::new(tokio::sync::Barrier::new(40));
    let burst = std::time::Instant::now();
    let tasks: Vec<_> = (0..40)
        .map(|n| {
            let (driver, release, args) = (enqueuer.clone(), release.clone(), ledger.record(n));
            tokio::spawn(async move {
                release.wait().await;
                enqueue_many(&*driver, [record::build(args)]).await.expect("enqueue")[0].id
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("enqueue task"));
    }
    let windows = (burst.elapsed().as_secs_f64() / window.as_secs_f64()).floor() as i64;
    wait_for("every job to run", DEADLINE, || async {
        let done = ledger.runs().len();
        (done == ids.len()).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");

    let mut conn = db.connect().await.expect("connect");
    let rows = diesel::sql_query(
        "SELECT COUNT(*) AS n FROM job_notifications WHERE channel = 'jobs_available' AND payload = 'work'",
    )
    .get_result::<Count>(&mut conn)
    .await
    .expect("count")
    .n;
    // The first enqueue writes its row; after that at most one trailing row per window.
    assert!((1..=windows + 2).contains(&rows), "{rows} rows for 40 enqueues over {windows} windows");
    assert!(rows < 40, "{rows} rows for 40 enqueues");
    assert_eq!(
        diesel::sql_query("SELECT COUNT(*) AS n FROM jobs WHERE state = 'completed'")
            .get_result::<Count>(&mut conn)
            .await
            .expect("count")
            .n,
        40
    );
}
