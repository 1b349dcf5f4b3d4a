//! The Postgres schema: migrations, the state enum, the invariants the writers keep, the
//! unique index, per-test isolation.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use jobs_core::migrate::migrate;
use jobs_core::postgres::connection::insert_many;
use jobs_core::postgres::migrate::{pending, revert_all};
use jobs_core::postgres::schema::jobs;
use jobs_core::postgres::schema::sql_types::JobState as JobStateSql;
use jobs_core::testing::TestDatabase;
use jobs_core::{Inserted, JobState, NewJob};
use jobs_tests::faults::invalid_rows;

fn job(queue: &str, kind: &str) -> NewJob {
    NewJob { max_attempts: 3, ..NewJob::new(kind, queue, "{}") }
}

#[derive(QueryableByName)]
struct Exists {
    #[diesel(sql_type = diesel::sql_types::Bool)]
    exists: bool,
}

async fn table_exists(conn: &mut diesel_async::AsyncPgConnection, name: &str) -> bool {
    diesel::sql_query("SELECT to_regclass($1) IS NOT NULL AS exists")
        .bind::<Text, _>(name)
        .get_result::<Exists>(conn)
        .await
        .expect("query to_regclass")
        .exists
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_go_up_down_and_up_again_and_rerunning_is_a_no_op() {
    let db = TestDatabase::empty().await.expect("test database");

    let applied = migrate(db.connect().await.expect("connect")).await.expect("first migrate");
    assert!(!applied.is_empty(), "a fresh database has migrations to apply");
    let mut conn = db.connect().await.expect("connect");
    assert!(table_exists(&mut conn, "jobs").await);

    let again = migrate(db.connect().await.expect("connect")).await.expect("second migrate");
    assert!(again.is_empty(), "re-running applies nothing, got {again:?}");
    assert!(pending(db.connect().await.expect("connect")).await.expect("pending").is_empty());

    let reverted = revert_all(db.connect().await.expect("connect")).await.expect("revert");
    assert_eq!(reverted.len(), applied.len());
    for table in ["jobs", "job_queues", "job_leaders", "job_nodes", "job_schedules", "job_stats"] {
        assert!(!table_exists(&mut conn, table).await, "{table} is gone after down");
    }

    let reapplied = migrate(db.connect().await.expect("connect")).await.expect("migrate after down");
    assert_eq!(reapplied, applied);
    assert!(table_exists(&mut conn, "jobs").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_serialise_on_the_advisory_lock() {
    let db = TestDatabase::empty().await.expect("test database");
    let (a, b) = tokio::join!(
        async { migrate(db.connect().await.expect("connect")).await.expect("migrate a") },
        async { migrate(db.connect().await.expect("connect")).await.expect("migrate b") },
    );
    let mut all: Vec<String> = a.into_iter().chain(b).collect();
    all.sort();
    assert_eq!(
        all,
        jobs_core::postgres::migrate::versions().expect("versions"),
        "each migration applied exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_on_a_current_thread_runtime_is_a_typed_error_not_a_panic() {
    let db = TestDatabase::empty().await.expect("test database");
    let url = db.url().to_owned();
    let outcome = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async { migrate(jobs_core::postgres::connect(&url).await.expect("connect")).await })
    })
    .join()
    .expect("thread");
    assert!(matches!(outcome, Err(jobs_core::Error::Runtime(_))), "got {outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_round_trips_through_postgres() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let id = insert_many(&mut conn, &[job("q", "k")], None).await.expect("insert")[0].id;
    for state in JobState::ALL {
        // Rust -> Postgres -> Rust through a bound parameter...
        let echoed: JobState =
            diesel::select(state.into_sql::<JobStateSql>()).get_result(&mut conn).await.expect("select");
        assert_eq!(echoed, state);
        // ...and through the column, keeping the table's constraints satisfied.
        let finalized = state.is_final().then(chrono::Utc::now);
        diesel::update(jobs::table.find(id))
            .set((
                jobs::state.eq(state),
                jobs::finalized_at.eq(finalized),
                jobs::attempted_at.eq(Some(chrono::Utc::now())),
            ))
            .execute(&mut conn)
            .await
            .expect("update state");
        let row = jobs_core::get_job(&mut conn, id).await.expect("get").expect("row");
        assert_eq!(row.state, state);
        let name: String =
            diesel::select(diesel::dsl::sql::<Text>(&format!("'{}'::job_state::text", state.as_str())))
                .get_result(&mut conn)
                .await
                .expect("cast");
        assert_eq!(name, state.as_str(), "the Postgres and Rust names agree");
    }
}

/// The table checks one invariant itself (finish times); the others are the writers' to
/// keep, and `JobRow::invariant_violations` (the rules of `jobs_driver::validation`) must
/// see each one broken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_invariant_check_finds_every_kind_of_broken_row() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(2).expect("pool");
    let mut conn = db.connect().await.expect("connect");
    let broken = [
        "queue = ''",
        "kind = repeat('k', 256)",
        "attempt = -1",
        "max_attempts = 0",
        "timeout_ms = 0",
        "errors = '{}'",
        "state = 'running', attempted_at = NULL",
        "unique_key = '\\x00'",
    ];
    for (n, change) in broken.iter().enumerate() {
        let id = insert_many(&mut conn, &[job("q", "k")], None).await.expect("insert")[0].id;
        assert_eq!(invalid_rows(&pool).await, n as i64);
        diesel::sql_query(format!("UPDATE jobs SET {change} WHERE id = {id}"))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{change}: {e}"));
        assert_eq!(invalid_rows(&pool).await, n as i64 + 1, "{change}");
    }
    // The one the table checks: a finished job without its finish time is refused.
    let id = insert_many(&mut conn, &[job("q", "k")], None).await.expect("insert")[0].id;
    let refused = diesel::sql_query(format!("UPDATE jobs SET state = 'completed' WHERE id = {id}"))
        .execute(&mut conn)
        .await;
    assert!(refused.is_err(), "a completed job without finalized_at must be refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unique_index_rejects_a_duplicate_only_while_the_first_is_in_a_unique_state() {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let unique = |key: &str| {
        let mut j = job("default", "unique_kind");
        j.unique = Some((key.as_bytes().to_vec(), JobState::UNFINISHED.to_vec()));
        j
    };

    let first = insert_many(&mut conn, &[unique("k1")], None).await.expect("insert")[0];
    assert!(!first.existing);
    let second = insert_many(&mut conn, &[unique("k1")], None).await.expect("insert")[0];
    assert_eq!(second, Inserted { id: first.id, existing: true });
    let other_key = insert_many(&mut conn, &[unique("k2")], None).await.expect("insert")[0];
    assert!(!other_key.existing && other_key.id != first.id);

    // Once the first job is completed (not a unique state here), the key is free again.
    diesel::update(jobs::table.find(first.id))
        .set((jobs::state.eq(JobState::Completed), jobs::finalized_at.eq(Some(chrono::Utc::now()))))
        .execute(&mut conn)
        .await
        .expect("complete");
    let third = insert_many(&mut conn, &[unique("k1")], None).await.expect("insert")[0];
    assert!(!third.existing && third.id != first.id, "{third:?}");

    // The index itself, not only the upsert, enforces it.
    let raw = diesel::insert_into(jobs::table)
        .values((
            jobs::kind.eq("unique_kind"),
            jobs::unique_key.eq(Some(b"k1".to_vec())),
            jobs::unique_states.eq(Some(JobState::UNFINISHED.to_vec())),
        ))
        .execute(&mut conn)
        .await;
    assert!(
        matches!(
            raw,
            Err(diesel::result::Error::DatabaseError(diesel::result::DatabaseErrorKind::UniqueViolation, _))
        ),
        "{raw:?}"
    );

    // Duplicates inside one batch collapse onto the first.
    let batch = insert_many(&mut conn, &[unique("k3"), job("default", "plain"), unique("k3")], None)
        .await
        .expect("batch");
    assert!(!batch[0].existing && !batch[1].existing);
    assert_eq!(batch[2], Inserted { id: batch[0].id, existing: true });
}

/// Both isolation tests insert into the same queue name and wait (up to a deadline) for
/// each other, so when the harness runs them in parallel their databases are live at once.
static ISOLATION_READY: AtomicUsize = AtomicUsize::new(0);

async fn write_shared_queue_and_count_own_rows(marker: &str) {
    let db = TestDatabase::new().await.expect("test database");
    let mut conn = db.connect().await.expect("connect");
    let mut rows = vec![job("shared-queue", marker); 5];
    rows[0].args = format!("{{\"marker\":\"{marker}\"}}");
    insert_many(&mut conn, &rows, None).await.expect("insert");
    ISOLATION_READY.fetch_add(1, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while AtomicUsize::load(&ISOLATION_READY, Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let kinds: Vec<String> = jobs::table
        .filter(jobs::queue.eq("shared-queue"))
        .select(jobs::kind)
        .load(&mut conn)
        .await
        .expect("load");
    assert_eq!(kinds.len(), 5, "only this test's rows are visible");
    assert!(kinds.iter().all(|k| k == marker));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_left() {
    write_shared_queue_and_count_own_rows("left").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_right() {
    write_shared_queue_and_count_own_rows("right").await;
}
