//! Postgres's archive (`jobs_archive`), seen from SQL: where each finished job is kept, that
//! the worker's archiver moves what finished in place, and that the migration moves the
//! finished rows it finds. (What every backend must do with finished jobs is in the
//! conformance suite, `cases/archive.rs`.)

use std::time::Duration;

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use jobs_core::driver::{Completion, JobClaimParams, JobCompleteManyParams, JobState};
use jobs_core::testing::TestDatabase;
use jobs_core::{IntoDriver, NewJob};
use jobs_tests::conformance::factory::succeeded;
use jobs_tests::conformance::jobs::{Behaviour, behave};
use jobs_tests::faults::count;
use jobs_tests::wait_for;

#[derive(diesel::QueryableByName)]
struct Place {
    #[diesel(sql_type = BigInt)]
    hot: i64,
    #[diesel(sql_type = BigInt)]
    archived: i64,
}

/// How many rows job `id` has in `jobs` and in `jobs_archive`.
async fn place(conn: &mut AsyncPgConnection, id: i64) -> (i64, i64) {
    let p: Place = diesel::sql_query(
        "SELECT (SELECT count(*) FROM jobs WHERE id = $1) AS hot,
                (SELECT count(*) FROM jobs_archive WHERE id = $1) AS archived",
    )
    .bind::<BigInt, _>(id)
    .get_result(conn)
    .await
    .expect("place");
    (p.hot, p.archived)
}

fn success(id: i64, attempt: i32) -> Completion {
    Completion { result: Some("42".into()), ..succeeded(id, "default", attempt) }
}

/// A success leaves `jobs` in its completion statement, unless it holds its key in
/// `completed`; a retry brings it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_moves_in_its_completion_statement() {
    let db = TestDatabase::new().await.expect("database");
    let driver = db.pool(2).expect("pool").into_driver();
    let mut conn = db.connect().await.expect("connect");
    let plain = NewJob::new("k", "default", "{}");
    let held = NewJob {
        unique: Some((vec![7; 32], vec![JobState::Available, JobState::Running, JobState::Completed])),
        ..NewJob::new("k", "default", "{}")
    };
    let inserted =
        jobs_core::postgres::connection::insert_many(&mut conn, &[plain, held], None).await.expect("insert");
    let (plain, held) = (inserted[0].id, inserted[1].id);
    let claim = JobClaimParams {
        queue: "default",
        limit: 10,
        node: "n",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    assert_eq!(driver.job_claim(claim).await.expect("claim").len(), 2);
    let done = [success(plain, 1), success(held, 1)];
    let applied = driver.job_complete_many(JobCompleteManyParams { completions: &done, now: None }).await;
    assert_eq!(applied.expect("complete").len(), 2);
    assert_eq!(place(&mut conn, plain).await, (0, 1), "archived at once");
    assert_eq!(place(&mut conn, held).await, (1, 0), "holds its key where the unique index sees it");
    assert_eq!(
        driver.job_archive(jobs_core::driver::JobArchiveParams { limit: 10 }).await.expect("archive"),
        0
    );

    let row =
        driver.job_get(jobs_core::driver::JobGetParams { id: plain }).await.expect("get").expect("kept");
    assert_eq!((row.state, row.result), (JobState::Completed, Some(serde_json::json!(42))));
    let retried = driver.job_retry_many(jobs_core::driver::JobRetryManyParams { ids: &[plain] }).await;
    assert_eq!(retried.expect("retry").retried, 1);
    assert_eq!(place(&mut conn, plain).await, (1, 0), "back in the hot table");
    let row =
        driver.job_get(jobs_core::driver::JobGetParams { id: plain }).await.expect("get").expect("kept");
    assert_eq!((row.state, row.attempt, row.finalized_at), (JobState::Available, 1, None));
}

/// A job that finished in place (here, discarded by its handler) is moved by the
/// archiver of a running worker within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_archiver_moves_what_finished_in_place() {
    let db = TestDatabase::new().await.expect("database");
    let pool = db.pool(4).expect("pool");
    let handle = jobs_core::Worker::builder(pool.clone())
        .queue("work", 2)
        .registry(jobs_tests::conformance::registry())
        .archiver(jobs_core::maintenance::ArchiverConfig {
            interval: Duration::from_millis(100),
            ..Default::default()
        })
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let id = behave::enqueue(&pool, Behaviour::Discard).await.expect("enqueue").id;
    wait_for("the discarded job to reach the archive", Duration::from_secs(30), || async {
        let mut conn = db.connect().await.ok()?;
        (place(&mut conn, id).await == (0, 1)).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
}

/// The migration moves the finished rows it finds, except those that hold their key; its
/// down migration brings the archive back into `jobs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_migration_moves_existing_finished_rows() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = db.connect().await.expect("connect");
    conn.batch_execute(include_str!(
        "../../jobs-postgres/migrations/2026-11-28-000001_jobs_archive/down.sql"
    ))
    .await
    .expect("down");
    conn.batch_execute(
        "INSERT INTO jobs (id, state, kind, finalized_at, unique_key, unique_states) VALUES
            (1, 'completed', 'k', now(), NULL, NULL),
            (2, 'discarded', 'k', now(), NULL, NULL),
            (3, 'completed', 'k', now(), '\\x01', '{available,completed}'),
            (4, 'cancelled', 'k', now(), '\\x02', '{available}'),
            (5, 'available', 'k', NULL, NULL, NULL)",
    )
    .await
    .expect("rows of the old layout");
    conn.batch_execute(include_str!("../../jobs-postgres/migrations/2026-11-28-000001_jobs_archive/up.sql"))
        .await
        .expect("up");
    let places: Vec<(i64, i64)> = {
        let mut all = Vec::new();
        for id in 1..=5 {
            all.push(place(&mut conn, id).await);
        }
        all
    };
    assert_eq!(places, vec![(0, 1), (0, 1), (1, 0), (0, 1), (1, 0)]);
    conn.batch_execute(include_str!(
        "../../jobs-postgres/migrations/2026-11-28-000001_jobs_archive/down.sql"
    ))
    .await
    .expect("down again");
    let back = count(&mut conn, "SELECT count(*) AS n FROM jobs WHERE id BETWEEN 1 AND 5").await;
    assert_eq!(back, 5, "every job back in jobs");
}

/// A retry never brings back from the archive a job that was running when it looked, even
/// when the job's success commits while the retry runs (the success here is held open in a
/// transaction until the retry has either finished or is waiting on the row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_running_job_leaves_its_success_alone() {
    let db = TestDatabase::new().await.expect("database");
    let driver = db.pool(4).expect("pool").into_driver();
    let mut conn = db.connect().await.expect("connect");
    let job = NewJob::new("k", "default", "{}");
    let id =
        jobs_core::postgres::connection::insert_many(&mut conn, &[job], None).await.expect("insert")[0].id;
    let claim = JobClaimParams {
        queue: "default",
        limit: 1,
        node: "n",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    assert_eq!(driver.job_claim(claim).await.expect("claim").len(), 1);

    let mut success = db.connect().await.expect("connect");
    success.batch_execute("BEGIN").await.expect("begin");
    success
        .batch_execute(&format!(
            "WITH moved AS (DELETE FROM jobs WHERE id = {id} RETURNING *)
             INSERT INTO jobs_archive SELECT id, 'completed', queue, kind, args, meta, tags, priority,
                    attempt, max_attempts, timeout_ms, created_at, scheduled_at, attempted_at, now(),
                    attempted_by, errors, result, cancel_requested_at, unique_key, unique_states
             FROM moved"
        ))
        .await
        .expect("the success, not committed yet");
    let retrying = driver.clone();
    let retry = tokio::spawn(async move {
        retrying.job_retry_many(jobs_core::driver::JobRetryManyParams { ids: &[id] }).await
    });
    wait_for("the retry to finish or wait on the row", Duration::from_secs(30), || async {
        if retry.is_finished() {
            return Some(());
        }
        let mut watcher = db.connect().await.ok()?;
        let waiting = count(
            &mut watcher,
            "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%jobs%'",
        )
        .await;
        (waiting > 0).then_some(())
    })
    .await;
    success.batch_execute("COMMIT").await.expect("commit the success");
    assert_eq!(retry.await.expect("join").expect("retry").retried, 0, "a running job is not retried");
    let row = driver.job_get(jobs_core::driver::JobGetParams { id }).await.expect("get").expect("kept");
    assert_eq!(row.state, JobState::Completed);
    assert_eq!(place(&mut conn, id).await, (0, 1));
}
