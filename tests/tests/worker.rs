//! The worker runtime against a real Postgres: claims, outcomes, retries, timeouts,
//! panics, cancellation, pause, shutdown, rescue, pruning, and exactly-once execution.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_core::db::execution::{Completion, complete_many, fetch_available};
use jobs_core::db::jobs::JobRow;
use jobs_core::maintenance::{
    Pruner, PrunerConfig, Rescuer, RescuerConfig, Scheduler, SchedulerConfig, ServiceContext,
};
use jobs_core::schema::jobs;
use jobs_core::testing::TestDatabase;
use jobs_core::{
    Clock, JobContext, JobState, ManualClock, Outcome, Pool, QueueConfig, Registry, Worker, WorkerBuilder,
    WorkerHandle, enqueue_many, job,
};
use jobs_tests::wait_for;
use serde::{Deserialize, Serialize};

const DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    n: i64,
}

#[job(kind = "test.record", queue = "work")]
async fn record(ctx: JobContext, args: Record) -> Result<i64, jobs_core::Error> {
    let mut conn = ctx.conn().await?;
    diesel::sql_query("INSERT INTO runs (job_id, n, node) VALUES ($1, $2, $3)")
        .bind::<BigInt, _>(ctx.id())
        .bind::<BigInt, _>(args.n)
        .bind::<diesel::sql_types::Text, _>(ctx.node())
        .execute(&mut conn)
        .await
        .map_err(jobs_core::Error::Database)?;
    Ok(args.n)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Behaviour {
    Fail,
    Panic,
    Hang,
    Snooze,
    Cancel,
    Discard,
    Succeed,
}

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct Declined;

#[job(kind = "test.behave", queue = "work", max_attempts = 3, timeout = "300ms",
      backoff = exponential(base = "10s", max = "1h"))]
async fn behave(ctx: JobContext, args: Behaviour) -> Result<Outcome<&'static str>, Declined> {
    match args {
        Behaviour::Fail => Err(Declined),
        Behaviour::Panic => panic!("boom at attempt {}", ctx.attempt()),
        Behaviour::Hang => {
            std::future::pending::<()>().await;
            Ok(Outcome::Complete("unreachable"))
        }
        Behaviour::Snooze => Ok(Outcome::snooze(Duration::from_secs(3600))),
        Behaviour::Cancel => Ok(Outcome::cancel("customer left")),
        Behaviour::Discard => Ok(Outcome::discard("bad address")),
        Behaviour::Succeed => Ok(Outcome::Complete("done")),
    }
}

/// Waits until cancelled, then reports it; never times out by itself.
#[job(kind = "test.wait", queue = "work")]
async fn wait_until_cancelled(ctx: JobContext) -> Result<(), std::io::Error> {
    ctx.cancelled().await;
    Ok(())
}

async fn setup(db: &TestDatabase) -> (Pool, AsyncPgConnection) {
    let mut conn = db.connect().await.expect("connect");
    diesel::sql_query("CREATE TABLE runs (job_id bigint NOT NULL, n bigint NOT NULL, node text NOT NULL)")
        .execute(&mut conn)
        .await
        .expect("runs table");
    (db.pool(12).expect("pool"), conn)
}

/// A worker of `slots` on "work" that wakes only on notifications (its poll is an hour away
/// and it runs no maintenance), started and listening.
async fn notified_only_worker(pool: &Pool, slots: usize) -> WorkerHandle {
    let handle = Worker::builder(pool.clone())
        .queue("work", slots)
        .registry(Registry::from_inventory().expect("registry"))
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

fn worker(pool: &Pool) -> WorkerBuilder {
    Worker::builder(pool.clone())
        .queue("work", 10)
        .registry(Registry::from_inventory().expect("registry"))
        .poll_interval(Duration::from_millis(200))
        .heartbeat_interval(Duration::from_millis(500))
}

/// Records a heartbeat for `node` at `at`, as a live worker would.
async fn heartbeat(conn: &mut AsyncPgConnection, node: &str, at: chrono::DateTime<Utc>) {
    jobs_core::db::nodes::heartbeat(conn, node, "host", 1, &serde_json::json!({}), Some(at))
        .await
        .expect("heartbeat");
}

async fn job_row(conn: &mut AsyncPgConnection, id: i64) -> JobRow {
    jobs_core::db::jobs::get(conn, id).await.expect("get").expect("job exists")
}

async fn wait_state(pool: &Pool, id: i64, state: JobState) -> JobRow {
    wait_for(&format!("job {id} to become {state}"), DEADLINE, || async {
        let mut conn = pool.get().await.ok()?;
        let row = job_row(&mut conn, id).await;
        (row.state == state).then_some(row)
    })
    .await
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

async fn count(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql).get_result::<Count>(conn).await.expect("count").n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_jobs_on_three_workers_each_run_exactly_once() {
    let db = TestDatabase::new().await.expect("test database");
    let (_, mut conn) = setup(&db).await;
    let mut handles = Vec::new();
    for i in 0..3 {
        let pool = db.pool(12).expect("pool");
        let w = Worker::builder(pool)
            .queue("work", 50)
            .node_name(format!("node-{i}"))
            .registry(Registry::from_inventory().expect("registry"))
            .build()
            .expect("build");
        handles.push(w.start().await.expect("start"));
    }
    let pool = db.pool(2).expect("pool");
    let requests: Vec<_> = (0..10_000).map(|n| record::build(Record { n })).collect();
    enqueue_many(&pool, requests).await.expect("enqueue");

    wait_for("all 10,000 jobs to complete", Duration::from_secs(180), || async {
        let mut c = pool.get().await.ok()?;
        let done = count(&mut c, "SELECT count(*) AS n FROM jobs WHERE state = 'completed'").await;
        (done == 10_000).then_some(())
    })
    .await;
    for handle in handles {
        handle.shutdown().await.expect("shutdown");
    }
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM runs").await, 10_000);
    assert_eq!(
        count(&mut conn, "SELECT count(DISTINCT job_id) AS n FROM runs").await,
        10_000,
        "no job ran twice"
    );
    assert_eq!(count(&mut conn, "SELECT count(DISTINCT n) AS n FROM runs").await, 10_000);
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM jobs WHERE attempt <> 1").await, 0);
    let nodes = count(&mut conn, "SELECT count(DISTINCT node) AS n FROM runs").await;
    println!("10,000 jobs ran exactly once, spread over {nodes} nodes");
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM job_nodes").await, 0, "nodes unregistered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_claim_asks_for_its_share_of_the_slots() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let requests: Vec<_> = (0..40).map(|n| record::build(Record { n })).collect();
    enqueue_many(&pool, requests).await.expect("enqueue");
    // Ten slots, two claims in flight: five jobs per claim at most, so one batch is on its
    // way while the other runs.
    let handle = worker(&pool).claims_in_flight(2).build().expect("build").start().await.expect("start");
    wait_for("all 40 jobs to complete", DEADLINE, || async {
        let mut c = pool.get().await.ok()?;
        (count(&mut c, "SELECT count(*) AS n FROM jobs WHERE state = 'completed'").await == 40).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
    // Each claim is one statement, so its jobs share one `attempted_at`.
    let largest = "SELECT max(n) AS n FROM (SELECT count(*) AS n FROM jobs GROUP BY attempted_at) AS claims";
    assert_eq!(count(&mut conn, largest).await, 5);
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM runs").await, 40);
    assert_eq!(
        count(&mut conn, "SELECT count(DISTINCT job_id) AS n FROM runs").await,
        40,
        "no job ran twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_on_the_backoff_policy_then_discard() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, _conn) = setup(&db).await;
    let clock = ManualClock::new(Utc::now());
    let handle = worker(&pool).clock(Arc::new(clock.clone())).without_maintenance().build().expect("build");
    let handle = handle.start().await.expect("start");
    let ctx = ServiceContext::new(pool.clone(), "test-scheduler").with_clock(Arc::new(clock.clone()));
    let id = behave::enqueue(&pool, Behaviour::Fail).await.expect("enqueue").id;

    // Attempt 1 fails: retry after 10 s (+ up to 10 % jitter) on the job's clock.
    let row = wait_state(&pool, id, JobState::Retryable).await;
    assert_eq!(row.attempt, 1);
    let delay = (row.scheduled_at - clock.now()).to_std().expect("in the future");
    assert!(
        delay >= Duration::from_secs(10) && delay <= Duration::from_secs(11),
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

    // Attempt 2 fails: 20 s.
    let row = wait_for("attempt 2 to fail", DEADLINE, || async {
        let mut c = pool.get().await.ok()?;
        let row = job_row(&mut c, id).await;
        (row.state == JobState::Retryable && row.attempt == 2).then_some(row)
    })
    .await;
    let delay = (row.scheduled_at - clock.now()).to_std().expect("in the future");
    assert!(
        delay >= Duration::from_secs(20) && delay <= Duration::from_secs(22),
        "attempt 2 delay {delay:?}"
    );

    // Attempt 3 of 3 fails: discarded, with three errors recorded.
    clock.advance(Duration::from_secs(23));
    assert_eq!(Scheduler::default().run_once(&ctx).await.expect("schedule"), 1);
    let row = wait_state(&pool, id, JobState::Discarded).await;
    assert_eq!(row.attempt, 3);
    assert_eq!(row.errors.as_array().map(Vec::len), Some(3));
    assert!(row.finalized_at.is_some());
    handle.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_timeouts_and_explicit_outcomes_are_recorded() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, _conn) = setup(&db).await;
    let handle = worker(&pool).without_maintenance().build().expect("build").start().await.expect("start");
    let ids: Vec<i64> = enqueue_many(
        &pool,
        [
            Behaviour::Panic,
            Behaviour::Hang,
            Behaviour::Snooze,
            Behaviour::Cancel,
            Behaviour::Discard,
            Behaviour::Succeed,
        ]
        .map(behave::build),
    )
    .await
    .expect("enqueue")
    .iter()
    .map(|e| e.id)
    .collect();

    let panicked = wait_state(&pool, ids[0], JobState::Retryable).await;
    let error = &panicked.errors[0];
    assert_eq!(error["error_type"], "panic");
    assert_eq!(error["message"], "panicked: boom at attempt 1");
    assert!(error["backtrace"].as_str().is_some_and(|b| !b.is_empty()), "backtrace recorded: {error}");

    let started = Instant::now();
    let timed_out = wait_state(&pool, ids[1], JobState::Retryable).await;
    assert_eq!(timed_out.errors[0]["error_type"], "timeout");
    assert!(timed_out.errors[0]["message"].as_str().is_some_and(|m| m.contains("300ms")));
    assert!(started.elapsed() < Duration::from_secs(30));

    let snoozed = wait_state(&pool, ids[2], JobState::Scheduled).await;
    assert_eq!(snoozed.attempt, 0, "a snooze gives the attempt back");
    let delay = snoozed.scheduled_at - snoozed.attempted_at.expect("attempted");
    assert!((delay.num_seconds() - 3600).abs() <= 1, "snoozed for an hour: {delay}");

    let cancelled = wait_state(&pool, ids[3], JobState::Cancelled).await;
    assert_eq!(cancelled.errors[0]["message"], "customer left");
    assert!(cancelled.finalized_at.is_some());
    let discarded = wait_state(&pool, ids[4], JobState::Discarded).await;
    assert_eq!(discarded.errors[0]["message"], "bad address");
    assert_eq!(discarded.attempt, 1, "discarded at once, attempts left unused");
    let done = wait_state(&pool, ids[5], JobState::Completed).await;
    assert_eq!(done.result, Some(serde_json::json!("done")));
    assert!(done.errors.as_array().is_some_and(Vec::is_empty));

    handle.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_completion_after_a_rescue_is_ignored() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let id = record::enqueue(&pool, Record { n: 1 }).await.expect("enqueue").id;

    // A node claims the job and then goes silent (it never heartbeats).
    let claimed = fetch_available(&mut conn, "work", 10, "ghost-node", None).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].attempt, 1);
    let ctx = ServiceContext::new(pool.clone(), "rescuer-node");
    let rescued = Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue");
    assert_eq!(rescued, vec![id]);
    let row = job_row(&mut conn, id).await;
    assert_eq!(row.state, JobState::Retryable);
    assert_eq!(row.errors[0]["error_type"], "rescued_node_lost");

    // The ghost finishes late: its completion is fenced out.
    let late = Completion {
        id,
        queue: "work".into(),
        attempt: 1,
        state: JobState::Completed,
        result: Some("\"late\"".into()),
        error: None,
        delay_ms: None,
        give_back_attempt: false,
        delete: false,
    };
    assert!(complete_many(&mut conn, std::slice::from_ref(&late), None).await.expect("complete").is_empty());
    assert_eq!(job_row(&mut conn, id).await.state, JobState::Retryable);

    // Claimed again (attempt 2), the stale attempt-1 write still does nothing; the
    // current claim's write applies.
    Scheduler::default().run_once(&ctx).await.expect("schedule");
    let again = fetch_available(&mut conn, "work", 10, "ghost-node", None).await.expect("claim");
    assert_eq!(again[0].attempt, 2);
    assert!(complete_many(&mut conn, std::slice::from_ref(&late), None).await.expect("complete").is_empty());
    let current = Completion { attempt: 2, result: Some("\"on time\"".into()), ..late };
    assert_eq!(complete_many(&mut conn, &[current], None).await.expect("complete"), vec![id]);
    let row = job_row(&mut conn, id).await;
    assert_eq!((row.state, row.result), (JobState::Completed, Some(serde_json::json!("on time"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_jobs_are_rescued_and_run_elsewhere() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let doomed = worker(&pool).node_name("doomed").without_maintenance().build().expect("build");
    let doomed = doomed.start().await.expect("start");
    let id = wait_until_cancelled::enqueue(&pool, ()).await.expect("enqueue").id;
    wait_state(&pool, id, JobState::Running).await;
    doomed.kill();

    // The doomed node's heartbeat row is still there; the rescuer waits for it to go
    // stale (10 s by default): age it rather than wait.
    diesel::sql_query(
        "UPDATE job_nodes SET heartbeat_at = now() - interval '1 minute' WHERE name = 'doomed'",
    )
    .execute(&mut conn)
    .await
    .expect("age heartbeat");
    // The survivor leads, so its own rescuer and scheduler bring the job back.
    let survivor = worker(&pool)
        .node_name("survivor")
        .rescuer(RescuerConfig { interval: Duration::from_millis(100), ..RescuerConfig::default() })
        .scheduler(SchedulerConfig { interval: Duration::from_millis(100), ..SchedulerConfig::default() })
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    assert!(survivor.is_leader());
    let row = wait_for("the survivor to pick the job up", DEADLINE, || async {
        let mut c = pool.get().await.ok()?;
        let row = job_row(&mut c, id).await;
        (row.state == JobState::Running && row.attempt == 2).then_some(row)
    })
    .await;
    assert_eq!(row.attempted_by, vec!["doomed".to_owned(), "survivor".to_owned()]);
    assert_eq!(row.errors[0]["error_type"], "rescued_node_lost");

    // Cancel it from another connection: the signal crosses nodes by NOTIFY.
    assert_eq!(jobs_core::cancel_job(&mut conn, id).await.expect("cancel"), Some(JobState::Running));
    let row = wait_state(&pool, id, JobState::Cancelled).await;
    assert!(row.finalized_at.is_some());
    survivor.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_is_not_fetched_until_resumed() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    jobs_core::set_queue_paused(&mut conn, "work", true).await.expect("pause");
    let handle = worker(&pool)
        .queue("other", 2)
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let paused_id = record::enqueue(&pool, Record { n: 1 }).await.expect("enqueue").id;
    let other_id = record::build(Record { n: 2 }).queue("other").enqueue(&pool).await.expect("enqueue").id;
    // The worker is clearly running (it completed the other queue's later job)...
    wait_state(&pool, other_id, JobState::Completed).await;
    // ...and keeps polling the other queue, yet never once fetched the paused one.
    let polled = handle.fetch_count("other");
    wait_for("three more polls of the other queue", DEADLINE, || async {
        (handle.fetch_count("other") >= polled + 3).then_some(())
    })
    .await;
    assert_eq!(handle.fetch_count("work"), 0, "a paused queue is never fetched");
    let row = job_row(&mut conn, paused_id).await;
    assert_eq!((row.state, row.attempt), (JobState::Available, 0));

    jobs_core::set_queue_paused(&mut conn, "work", false).await.expect("resume");
    wait_state(&pool, paused_id, JobState::Completed).await;
    assert!(handle.fetch_count("work") > 0);
    handle.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_what_it_can_and_hands_back_the_rest() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let handle = worker(&pool)
        .shutdown_timeout(Duration::from_millis(300))
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let ids: Vec<i64> = enqueue_many(&pool, (0..3).map(|_| wait_until_cancelled::build(())))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    wait_for("three running jobs", DEADLINE, || async { (handle.running() == 3).then_some(()) }).await;
    let report = handle.shutdown().await.expect("shutdown");
    assert_eq!(report.handed_back, 3);
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM jobs WHERE state = 'running'").await, 0);
    for id in ids {
        let row = job_row(&mut conn, id).await;
        assert_eq!(row.state, JobState::Retryable);
        assert_eq!(row.attempt, 0, "handing back does not use up an attempt");
        assert_eq!(row.errors[0]["error_type"], "shutdown");
    }
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM job_nodes").await, 0);
    assert_eq!(count(&mut conn, "SELECT count(*) AS n FROM job_leaders").await, 0, "lease released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_on_completion_leaves_no_row() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, _conn) = setup(&db).await;
    let handle = Worker::builder(pool.clone())
        .queue_config(QueueConfig::new("work", 5).delete_on_completion())
        .registry(Registry::from_inventory().expect("registry"))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let ok = behave::enqueue(&pool, Behaviour::Succeed).await.expect("enqueue").id;
    let failing = behave::enqueue(&pool, Behaviour::Discard).await.expect("enqueue").id;
    wait_state(&pool, failing, JobState::Discarded).await;
    wait_for("the completed job to be deleted", DEADLINE, || async {
        let mut c = pool.get().await.ok()?;
        jobs_core::db::jobs::get(&mut c, ok).await.ok()?.is_none().then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pruner_deletes_exactly_what_the_retention_says() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let now = Utc::now();
    let ids: Vec<i64> = enqueue_many(&pool, (0..8).map(|n| record::build(Record { n })))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    // (state, finalized hours ago)
    let layout = [
        (JobState::Completed, 25),
        (JobState::Completed, 23),
        (JobState::Completed, 48),
        (JobState::Discarded, 25),
        (JobState::Discarded, 200),
        (JobState::Cancelled, 1),
        (JobState::Cancelled, 30),
        (JobState::Available, 0),
    ];
    for (id, (state, hours)) in ids.iter().zip(layout) {
        if state.is_final() {
            diesel::update(jobs::table.find(id))
                .set((jobs::state.eq(state), jobs::finalized_at.eq(now - chrono::Duration::hours(hours))))
                .execute(&mut conn)
                .await
                .expect("age job");
        }
    }
    let clock = ManualClock::new(now);
    let ctx = ServiceContext::new(pool.clone(), "pruner").with_clock(Arc::new(clock));
    let pruner = Pruner::new(PrunerConfig {
        completed: Some(Duration::from_secs(24 * 3600)),
        discarded: Some(Duration::from_secs(7 * 24 * 3600)),
        cancelled: None,
        batch: 1,
        ..PrunerConfig::default()
    });
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), 3);
    let left: Vec<i64> = jobs::table.select(jobs::id).order(jobs::id).load(&mut conn).await.expect("ids");
    assert_eq!(left, vec![ids[1], ids[3], ids[5], ids[6], ids[7]]);
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), 0, "nothing more to do");
}

/// A busy queue finishes more jobs between two passes than a small fixed number of batches
/// can delete (the pruner once stopped after 100 batches of 1,000, so a queue finishing
/// more than 1,700 jobs/s outgrew its retention). One pass with the defaults takes them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pruner_pass_keeps_pace_with_a_busy_queue() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let finished = 150_000i64;
    diesel::sql_query(
        "INSERT INTO jobs (state, kind, queue, finalized_at)
         SELECT 'completed', 'record', 'work', now() - interval '2 days' FROM generate_series(1, $1)",
    )
    .bind::<BigInt, _>(finished)
    .execute(&mut conn)
    .await
    .expect("load finished jobs");
    let recent = record::enqueue(&pool, Record { n: 1 }).await.expect("enqueue").id;
    let ctx = ServiceContext::new(pool.clone(), "pruner");
    let pruner = Pruner::new(PrunerConfig::default());
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), finished);
    let left: Vec<i64> = jobs::table.select(jobs::id).load(&mut conn).await.expect("ids");
    assert_eq!(left, vec![recent], "only the job inside its retention stays");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notification_wake_up_beats_polling() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, _conn) = setup(&db).await;
    async fn median_latency(pool: &Pool, listen: bool) -> Duration {
        let handle = Worker::builder(pool.clone())
            .queue("work", 4)
            .registry(Registry::from_inventory().expect("registry"))
            .poll_interval(Duration::from_millis(500))
            .listen(listen)
            .without_maintenance()
            .build()
            .expect("build")
            .start()
            .await
            .expect("start");
        if listen {
            wait_for("the LISTEN connection", DEADLINE, || async { handle.is_listening().then_some(()) })
                .await;
        }
        let mut samples = Vec::new();
        for n in 0..7 {
            let start = Instant::now();
            let id = record::enqueue(pool, Record { n }).await.expect("enqueue").id;
            wait_state(pool, id, JobState::Completed).await;
            samples.push(start.elapsed());
        }
        handle.shutdown().await.expect("shutdown");
        samples.sort();
        samples[samples.len() / 2]
    }
    let notified = median_latency(&pool, true).await;
    let polled = median_latency(&pool, false).await;
    println!("enqueue-to-completed median: {notified:?} with LISTEN/NOTIFY, {polled:?} polling every 500 ms");
    assert!(notified < polled, "notification ({notified:?}) should beat polling ({polled:?})");
    assert!(notified < Duration::from_millis(250), "a notified worker starts at once: {notified:?}");
}

/// Enqueues through a pool ration their wake-ups (`jobs_core::wakeups`: one per queue per
/// window, plus the first) and lose none: a worker that only wakes on notifications (its
/// poll is an hour away) runs a burst of one-job enqueues from 50 tasks released at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_pool_enqueues_shares_few_wake_ups_and_loses_none() {
    use futures::StreamExt;
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let mut listener = db.connect().await.expect("listener");
    diesel::sql_query("LISTEN jobs_available").execute(&mut listener).await.expect("listen");
    let mut notifications = std::pin::pin!(listener.notifications_stream());
    let handle = notified_only_worker(&pool, 100).await;

    let window = Duration::from_millis(300);
    jobs_core::wakeups::set_wake_window(&pool, window);
    let release = Arc::new(tokio::sync::Barrier::new(50));
    let burst = Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let (pool, release) = (pool.clone(), release.clone());
            tokio::spawn(async move {
                release.wait().await;
                record::enqueue(&pool, Record { n }).await.expect("enqueue").id
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

/// A job whose wake-up arrives while a claim is running (a claim that started too early to
/// see it, and comes back short) is claimed at once, not at the next poll. Here the worker
/// polls once an hour, and each claim first skips 100,000 jobs another transaction holds,
/// which keeps it running long enough for the second job's wake-up to arrive meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_that_arrives_during_a_claim_is_not_lost() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    diesel::sql_query(
        "INSERT INTO jobs (kind, queue, args, priority) \
         SELECT 'test.record', 'work', '{\"n\": 0}', 0 FROM generate_series(1, 100000)",
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

    let first = record::build(Record { n: 1 }).priority(1).enqueue(&pool).await.expect("first").id;
    wait_for("the claim the first job's wake-up starts", DEADLINE, claiming).await;
    let second = record::build(Record { n: 2 }).priority(1).enqueue(&pool).await.expect("second").id;
    wait_state(&pool, first, JobState::Completed).await;
    wait_state(&pool, second, JobState::Completed).await;
    handle.shutdown().await.expect("shutdown");
    diesel::sql_query("ROLLBACK").execute(&mut holder).await.expect("release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_another_takes_over_when_the_lease_expires() {
    use jobs_core::maintenance::{LeaderConfig, LeaderElector};
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
    let clock = ManualClock::new(Utc::now());
    let a = ServiceContext::new(pool.clone(), "node-a").with_clock(Arc::new(clock.clone()));
    let b = ServiceContext::new(pool.clone(), "node-b").with_clock(Arc::new(clock.clone()));
    let elector =
        LeaderElector::new(LeaderConfig { ttl: Duration::from_secs(15), ..LeaderConfig::default() });

    assert!(elector.run_once(&a).await.expect("a"));
    assert!(!elector.run_once(&b).await.expect("b"), "the lease is held");
    clock.advance(Duration::from_secs(10));
    assert!(elector.run_once(&a).await.expect("a renews"));
    clock.advance(Duration::from_secs(10));
    assert!(!elector.run_once(&b).await.expect("b"), "renewed 10 s ago for 15 s");
    // a stops renewing (it died): once the lease runs out, b takes over.
    clock.advance(Duration::from_secs(6));
    assert!(elector.run_once(&b).await.expect("b takes over"));
    assert!(b.is_leader());
    assert!(!elector.run_once(&a).await.expect("a"), "a learns it lost the lease");
    assert!(!a.is_leader());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_running_past_its_timeout_on_a_live_node_is_rescued_and_fenced() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let start = Utc::now();
    let clock = ManualClock::new(start);
    // `behave` has a 300 ms timeout; the node below keeps heartbeating but never finishes.
    let id = behave::enqueue(&pool, Behaviour::Hang).await.expect("enqueue").id;
    heartbeat(&mut conn, "stuck-node", start).await;
    let claimed = fetch_available(&mut conn, "work", 1, "stuck-node", Some(start)).await.expect("claim");
    assert_eq!(claimed[0].id, id);
    let ctx = ServiceContext::new(pool.clone(), "rescuer").with_clock(Arc::new(clock.clone()));
    let rescuer =
        Rescuer::new(RescuerConfig { timeout_grace: Duration::from_secs(5), ..RescuerConfig::default() });

    // Within timeout + grace, and the node is alive: left alone.
    clock.advance(Duration::from_secs(5));
    heartbeat(&mut conn, "stuck-node", clock.now()).await;
    assert!(rescuer.run_once(&ctx).await.expect("rescue").is_empty());
    // Past it: rescued as timed out, although the node still heartbeats.
    clock.advance(Duration::from_secs(1));
    heartbeat(&mut conn, "stuck-node", clock.now()).await;
    assert_eq!(rescuer.run_once(&ctx).await.expect("rescue"), vec![id]);
    let row = job_row(&mut conn, id).await;
    assert_eq!((row.state, row.attempt), (JobState::Retryable, 1));
    assert_eq!(row.errors[0]["error_type"], "rescued_timeout");

    // Out of attempts, a rescue discards instead.
    diesel::update(jobs::table.find(id))
        .set((jobs::state.eq(JobState::Running), jobs::attempt.eq(3), jobs::attempted_at.eq(start)))
        .execute(&mut conn)
        .await
        .expect("claim again");
    assert_eq!(rescuer.run_once(&ctx).await.expect("rescue"), vec![id]);
    let row = job_row(&mut conn, id).await;
    assert_eq!(row.state, JobState::Discarded);
    assert!(row.finalized_at.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_reply_was_lost_is_handed_back_by_its_own_node_and_held_jobs_are_not() {
    let db = TestDatabase::new().await.expect("test database");
    let (pool, mut conn) = setup(&db).await;
    let start = Utc::now();
    let clock = ManualClock::new(start);
    // The node claimed this job, but the connection died before the reply arrived: the
    // row says `running` on "lossy-node", and the node knows nothing of it.
    let lost = record::enqueue(&pool, Record { n: 7 }).await.expect("enqueue").id;
    let claimed = fetch_available(&mut conn, "work", 10, "lossy-node", Some(start)).await.expect("claim");
    assert_eq!(claimed.len(), 1);

    let handle = worker(&pool)
        .node_name("lossy-node")
        .clock(Arc::new(clock.clone()))
        .orphan_grace(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_millis(50))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    // A job the node does hold, running as long as it likes.
    let held = wait_until_cancelled::enqueue(&pool, ()).await.expect("enqueue").id;
    wait_state(&pool, held, JobState::Running).await;

    // Past the grace, the lost claim is released; the held job, just as old, is not.
    clock.advance(Duration::from_secs(60));
    let released = wait_state(&pool, lost, JobState::Retryable).await;
    assert_eq!(released.errors[0]["error_type"], "rescued_orphaned");
    assert_eq!(released.attempt, 1, "the attempt is kept, fencing the lost claim");
    let still = job_row(&mut conn, held).await;
    assert_eq!((still.state, still.attempt), (JobState::Running, 1), "a held job is never released");
    assert!(still.errors.as_array().is_some_and(Vec::is_empty));

    // The scheduler makes it available again and the node runs it, once.
    Scheduler::new(SchedulerConfig::default()).run_once(handle.service_context()).await.expect("schedule");
    let done = wait_state(&pool, lost, JobState::Completed).await;
    assert_eq!(done.attempt, 2);
    assert_eq!(count(&mut conn, &format!("SELECT count(*) AS n FROM runs WHERE job_id = {lost}")).await, 1);
    jobs_core::cancel_job(&mut conn, held).await.expect("cancel");
    wait_state(&pool, held, JobState::Cancelled).await;
    handle.shutdown().await.expect("shutdown");
}
