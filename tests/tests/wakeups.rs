//! Postgres wake-ups: enqueues through a pool ration their NOTIFYs and lose none, and a
//! wake-up that arrives while a claim runs is not lost. (The runtime's behaviour on every
//! backend is the conformance suite's: `conformance_postgres.rs`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_core::driver::rows::Count;
use jobs_core::postgres::Pool;
use jobs_core::testing::TestDatabase;
use jobs_core::{JobState, Worker, WorkerHandle};
use jobs_tests::conformance::jobs::{Ledger, record};
use jobs_tests::conformance::registry;
use jobs_tests::wait_for;

const DEADLINE: Duration = Duration::from_secs(60);

/// A worker of `slots` on "work" that wakes only on notifications (its poll is an hour away
/// and it runs no maintenance), started and listening.
async fn notified_only_worker(pool: &Pool, slots: usize) -> WorkerHandle {
    let handle = Worker::builder(pool.clone())
        .queue("work", slots)
        .registry(registry())
        .poll_interval(Duration::from_secs(3600))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    wait_for("the LISTEN connection", DEADLINE, || async { handle.is_listening().then_some(()) }).await;
    handle
}

async fn wait_state(pool: &Pool, id: i64, state: JobState) {
    wait_for(&format!("job {id} to become {state}"), DEADLINE, || async {
        let mut conn = pool.get().await.ok()?;
        let row = jobs_core::get_job(&mut conn, id).await.ok()??;
        (row.state == state).then_some(())
    })
    .await
}

async fn count(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql).get_result::<Count>(conn).await.expect("count").n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_pool_enqueues_shares_few_wake_ups_and_loses_none() {
    use futures::StreamExt;
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(12).expect("pool");
    let mut conn = db.connect().await.expect("connect");
    let ledger = Ledger::new();
    let mut listener = db.connect().await.expect("listener");
    diesel::sql_query("LISTEN jobs_available").execute(&mut listener).await.expect("listen");
    let mut notifications = std::pin::pin!(listener.notifications_stream());
    let handle = notified_only_worker(&pool, 100).await;

    let window = Duration::from_millis(300);
    jobs_core::postgres::wakeups::set_wake_window(&pool, window);
    let release = Arc::new(tokio::sync::Barrier::new(50));
    let burst = Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let (pool, release, args) = (pool.clone(), release.clone(), ledger.record(n));
            tokio::spawn(async move {
                release.wait().await;
                record::enqueue(&pool, args).await.expect("enqueue").id
            })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("enqueue task"));
    }
    let windows = (burst.elapsed().as_secs_f64() / window.as_secs_f64()).floor() as usize;
    for id in ids {
        wait_state(&pool, id, JobState::Completed).await;
    }
    handle.shutdown().await.expect("shutdown");

    // Everything the inserts sent was delivered with their commits, before this marker.
    diesel::sql_query("NOTIFY jobs_available, 'marker'").execute(&mut conn).await.expect("marker");
    let mut wake_ups = 0;
    loop {
        let n = tokio::time::timeout(DEADLINE, notifications.next())
            .await
            .expect("the marker arrives")
            .expect("stream open")
            .expect("notification");
        match n.payload.as_str() {
            "marker" => break,
            "work" => wake_ups += 1,
            other => panic!("unexpected payload {other}"),
        }
    }
    // The first insert notifies; after that at most one trailing wake-up per window.
    assert!(
        (1..=windows + 2).contains(&wake_ups),
        "{wake_ups} wake-ups for 50 enqueues over {windows} windows"
    );
    assert!(wake_ups < 50, "{wake_ups} wake-ups for 50 enqueues");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_that_arrives_during_a_claim_is_not_lost() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(12).expect("pool");
    let mut conn = db.connect().await.expect("connect");
    let ledger = Ledger::new();
    diesel::sql_query(
        "INSERT INTO jobs (kind, queue, args, priority) \
         SELECT 'conformance.record', 'work', '{\"ledger\": 0, \"n\": 0}', 0 FROM generate_series(1, 100000)",
    )
    .execute(&mut conn)
    .await
    .expect("held jobs");
    let mut holder = db.connect().await.expect("holder");
    diesel::sql_query("BEGIN").execute(&mut holder).await.expect("begin");
    diesel::sql_query("SELECT id FROM jobs FOR UPDATE").execute(&mut holder).await.expect("hold them");

    let handle = notified_only_worker(&pool, 10).await;
    let claiming = async || {
        let mut conn = pool.get().await.ok()?;
        let active = count(
            &mut conn,
            "SELECT count(*) AS n FROM pg_stat_activity \
             WHERE state = 'active' AND query LIKE 'UPDATE jobs%SET state = ''running''%'",
        )
        .await;
        (active > 0).then_some(())
    };

    let first = record::build(ledger.record(1)).priority(1).enqueue(&pool).await.expect("first").id;
    wait_for("the claim the first job's wake-up starts", DEADLINE, claiming).await;
    let second = record::build(ledger.record(2)).priority(1).enqueue(&pool).await.expect("second").id;
    wait_state(&pool, first, JobState::Completed).await;
    wait_state(&pool, second, JobState::Completed).await;
    handle.shutdown().await.expect("shutdown");
    diesel::sql_query("ROLLBACK").execute(&mut holder).await.expect("release");
}
