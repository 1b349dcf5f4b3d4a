//! Through a real PgBouncer 1.18 in transaction mode, started by each test in front of its
//! database with fewer server connections than clients (the conformance suite runs through
//! it too: `conformance_pgbouncer.rs`):
//! - the trap is real: a driver that does not know it is behind the pooler fails;
//! - the application's enqueue commits and rolls back with its transaction, on async and
//!   sync diesel connections;
//! - migrations run through it, from several processes' connections at once;
//! - two worker processes share its server connections and run every job exactly once.

use std::sync::Arc;
use std::time::Duration;

use diesel::Connection;
use diesel_async::AsyncConnection;
use jobs_core::driver::{Driver, JobGetParams, JobInsertManyParams, NewJob};
use jobs_core::postgres::{migrate, pooler};
use jobs_core::testing::{PgBouncer, TestDatabase};
use jobs_core::{IntoDriver, PgDriver, enqueue_many};
use jobs_tests::any_db::{AnyDb, RUNS_TABLE};
use jobs_tests::fault_jobs::{Step, step};
use jobs_tests::faults::JobLedger;
use jobs_tests::processes::{WorkerProcess, assert_no_panic, log_dir, stop_all};

const BINARY: &str = env!("CARGO_BIN_EXE_fault_worker");

/// Whether `error` is PgBouncer's transaction mode losing or mixing up a prepared statement.
fn is_prepared_statement_error(error: &str) -> bool {
    error.contains("prepared statement")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_that_does_not_know_it_is_behind_the_pooler_loses_its_prepared_statements() {
    let db = TestDatabase::new().await.expect("test database");
    let bouncer = PgBouncer::start_in_front_of(db.url(), 2).expect("pgbouncer");
    // The plain pool and driver: statements prepared in one pooler transaction, run in the next.
    let naive = PgDriver::new(jobs_core::postgres::pool(&bouncer.url(db.name()), 16).expect("pool"));
    let aware = PgDriver::through_pooler(pooler::pool(&bouncer.url(db.name()), 16).expect("pool"));

    let hammer = |driver: PgDriver| async move {
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let driver = driver.clone();
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    for _ in 0..50 {
                        if let Err(e) = driver.job_get(JobGetParams { id: 1 }).await {
                            errors.push(e.to_string());
                        }
                    }
                    errors
                })
            })
            .collect();
        let mut errors = Vec::new();
        for task in tasks {
            errors.extend(task.await.expect("task"));
        }
        errors
    };
    let naive_errors = hammer(naive).await;
    assert!(
        naive_errors.iter().any(|e| is_prepared_statement_error(e)),
        "800 reads through 2 shared server connections must trip over prepared statements \
         (else this PgBouncer is not in transaction mode); errors: {naive_errors:?}"
    );
    let aware_errors = hammer(aware).await;
    assert_eq!(aware_errors, Vec::<String>::new(), "through_pooler: every read succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applications_enqueue_commits_and_rolls_back_with_its_transaction_through_pgbouncer() {
    let db = TestDatabase::new().await.expect("test database");
    let bouncer = PgBouncer::start_in_front_of(db.url(), 2).expect("pgbouncer");
    let url = bouncer.url(db.name());
    let app_pool = pooler::pool(&url, 12).expect("pool");
    {
        let mut conn = app_pool.get().await.expect("connection");
        conn.transaction(async |tx| {
            diesel_async::RunQueryDsl::execute(
                diesel::sql_query("CREATE TABLE orders (id bigint PRIMARY KEY)"),
                tx,
            )
            .await
        })
        .await
        .expect("orders table");
    }

    // Twelve request handlers at once, each writing an order and enqueueing its job in one
    // transaction: odd orders roll back.
    let handlers: Vec<_> = (0..12_i64)
        .map(|handler| {
            let pool = app_pool.clone();
            tokio::spawn(async move {
                for n in 0..20_i64 {
                    let order = handler * 100 + n;
                    let mut conn = pool.get().await.expect("connection");
                    let outcome: Result<(), jobs_core::Error> = conn
                        .transaction(async |tx| {
                            let insert = diesel::sql_query(format!("INSERT INTO orders VALUES ({order})"));
                            diesel_async::RunQueryDsl::execute(insert, tx)
                                .await
                                .map_err(|e| jobs_core::Error::Pool(e.to_string()))?;
                            step::enqueue(&mut *tx, Step { work_ms: order as u64 }).await?;
                            if order % 2 == 1 {
                                return Err(jobs_core::Error::Pool("rolled back".into()));
                            }
                            Ok(())
                        })
                        .await;
                    match outcome {
                        Err(jobs_core::Error::Pool(reason)) if reason == "rolled back" => {}
                        other => other.expect("a committed order"),
                    }
                }
            })
        })
        .collect();
    for handler in handlers {
        handler.await.expect("handler");
    }

    // Sync diesel connections (libpq) through the same pooler, their statement cache off
    // (diesel's cached statements are named per connection: two would collide), each
    // committing one job and rolling one back, on the same server connection.
    let sync_url = url.clone();
    tokio::task::spawn_blocking(move || {
        let connect = || {
            let mut conn = diesel::PgConnection::establish(&sync_url).expect("sync connection");
            conn.set_prepared_statement_cache_size(diesel::connection::CacheSize::Disabled);
            conn
        };
        for (n, mut conn) in [connect(), connect()].into_iter().enumerate() {
            let work = 100_000 + 10 * n as u64;
            conn.transaction::<_, jobs_core::Error, _>(|tx| {
                step::build(Step { work_ms: work }).enqueue_sync(tx)?;
                Ok(())
            })
            .expect("sync enqueue");
            let rolled_back = conn.transaction::<(), jobs_core::Error, _>(|tx| {
                step::build(Step { work_ms: work + 1 }).enqueue_sync(tx)?;
                Err(jobs_core::Error::Pool("rolled back".into()))
            });
            assert!(
                matches!(rolled_back, Err(jobs_core::Error::Pool(ref r)) if r == "rolled back"),
                "{rolled_back:?}"
            );
        }
    })
    .await
    .expect("sync enqueue task");

    // Read back on a direct connection.
    let direct = db.driver(2).expect("driver");
    let jobs = jobs_tests::faults::all_jobs(&direct).await;
    let mut orders: Vec<i64> = jobs.iter().map(|j| j.args["work_ms"].as_i64().expect("work_ms")).collect();
    orders.sort_unstable();
    let mut expected: Vec<i64> =
        (0..12).flat_map(|h| (0..20).map(move |n| h * 100 + n)).filter(|o| o % 2 == 0).collect();
    expected.extend([100_000, 100_010]);
    assert_eq!(orders, expected, "exactly the committed orders' jobs exist");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_run_through_pgbouncer_from_several_connections_at_once() {
    let db = TestDatabase::empty().await.expect("empty database");
    let bouncer = PgBouncer::start_in_front_of(db.url(), 2).expect("pgbouncer");
    let url = bouncer.url(db.name());
    let runs: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let conn = pooler::connect(&url).await.expect("connect through pgbouncer");
                migrate::migrate_in_one_transaction(conn).await
            })
        })
        .collect();
    let mut applied = Vec::new();
    for run in runs {
        applied.extend(run.await.expect("task").expect("migrations through pgbouncer"));
    }
    applied.sort();
    assert_eq!(applied, migrate::versions().expect("versions"), "each migration applied once");

    // The driver's own migrate() goes the same way, and finds nothing left to do.
    let driver = PgDriver::through_pooler(pooler::pool(&url, 2).expect("pool"));
    assert_eq!(driver.migrate().await.expect("migrate"), Vec::<String>::new());
    let inserted = driver
        .job_insert_many(JobInsertManyParams { jobs: &[NewJob::new("k", "q", "{}")], now: None })
        .await
        .expect("insert through pgbouncer");
    assert_eq!(inserted.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_sharing_pgbouncers_server_connections_run_every_job_exactly_once() {
    let db = TestDatabase::new().await.expect("test database");
    // Two server connections for two processes of 26 client connections each: every server
    // connection serves both processes, whose statement names are the same ("s0", "s1", ...).
    let bouncer = PgBouncer::start_in_front_of(db.url(), 2).expect("pgbouncer");
    let url = bouncer.url(db.name());
    let driver: Arc<dyn Driver> =
        PgDriver::through_pooler(pooler::pool(&url, 4).expect("pool")).into_driver();
    AnyDb::of(&*driver).execute(RUNS_TABLE).await.expect("runs table");
    let enqueued = 1_000;
    enqueue_many(&driver, (0..enqueued).map(|i| step::build(Step { work_ms: (i % 3) as u64 })))
        .await
        .expect("enqueue through pgbouncer");

    let logs = log_dir();
    let workers = vec![
        WorkerProcess::start_with(BINARY, &url, "pooled-1", 20, &logs, &["--through-pooler"]),
        WorkerProcess::start_with(
            BINARY,
            &url,
            "pooled-2",
            20,
            &logs,
            &["--through-pooler", "--listen-url", db.url()],
        ),
    ];
    let ledger = JobLedger::wait_all_completed(driver.clone(), enqueued, Duration::from_secs(120)).await;
    let logs = stop_all(workers).await;
    ledger.assert_exactly_once();
    for (node, log) in ["pooled-1", "pooled-2"].iter().zip(&logs) {
        assert_no_panic(node, log);
        assert!(!is_prepared_statement_error(log), "{node} tripped over a prepared statement:\n{log}");
    }
    assert!(!bouncer.log().contains("prepared statement"), "pgbouncer log:\n{}", bouncer.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_prepared_statement_outlives_its_transaction_on_pgbouncers_server_connection() {
    use jobs_core::driver::rows::Count;
    use jobs_core::driver::{JobFilter, JobListParams, JobState};

    let db = TestDatabase::new().await.expect("test database");
    // One server connection: every client's statements meet in one server session.
    let bouncer = PgBouncer::start_in_front_of(db.url(), 1).expect("pgbouncer");
    let pool = pooler::pool(&bouncer.url(db.name()), 4).expect("pool");
    // `PgDriver::new` on a pooler pool is a `through_pooler` driver.
    let driver = PgDriver::new(pool.clone());
    assert!(driver.is_through_pooler());
    let ids = driver
        .job_insert_many(JobInsertManyParams { jobs: &[NewJob::new("k", "q", "{}")], now: None })
        .await
        .expect("insert");
    // Reads and writes that carry the `job_state` enum and its array, on several
    // connections at once (each one's first use of the types).
    let filter = JobFilter { states: vec![JobState::Available, JobState::Running], ..JobFilter::default() };
    let reads = (0..8).map(|_| async {
        driver.job_get(JobGetParams { id: ids[0].id }).await.expect("get");
        driver.job_list(JobListParams { filter: &filter, before: None, limit: 10 }).await.expect("list");
    });
    futures::future::join_all(reads).await;
    let mut conn = pool.get().await.expect("connection");
    let left = conn
        .transaction(async |tx| {
            diesel_async::RunQueryDsl::get_result::<Count>(
                // Not counting this statement itself (prepared to run).
                diesel::sql_query(
                    "SELECT count(*) AS n FROM pg_prepared_statements WHERE statement NOT LIKE '%pg_prepared_statements%'",
                ),
                tx,
            )
            .await
        })
        .await
        .expect("count");
    assert_eq!(left.n, 0, "prepared statements left on the server connection PgBouncer lends to everyone");
}
