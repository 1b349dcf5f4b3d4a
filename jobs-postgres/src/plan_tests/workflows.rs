//! The workflow statements stay on their indexes with a fan-out of 10,000 and 20,000
//! finished jobs in the archive: the settle touches the rows of the jobs it settles, and
//! the settler's sweep reads the unsettled edges (a quarter of the edges here: the
//! planner may read them from the table or from their index) and joins them to `jobs` by
//! primary key, never reading the finished jobs.

use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection};
use jobs_driver::workflow::insert_workflow;
use jobs_driver::{DependsOn, Needs, NewJob, NewStep, NewWorkflow, OnFailure};

use super::plan;
use crate::testing::TestDatabase;
use crate::workflows::PgStore;
use crate::workflows::statements::{
    DEPENDENCY_STATES, DEPENDENTS_SETTLED, DEPENDENTS_UNSETTLED, EDGES_UNSETTLED, FINISHED_WITH_UNSETTLED,
    LOCK_DEPENDENCIES_ARCHIVED, LOCK_DEPENDENCIES_HOT, READ_LOCKED, SET_OUTCOME, SETTLED_EDGES_INTO,
};

/// A root step with 10,000 dependents, 20,000 completed jobs in the archive, 30,000
/// settled edges and 5,000 workflows; returns the root's id and the connection, the tables analyzed.
async fn fan_out(db: &TestDatabase) -> (i64, AsyncPgConnection) {
    let mut conn = db.connect().await.expect("connect");
    diesel::sql_query(
        "INSERT INTO jobs_archive (id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
                                   created_at, scheduled_at, finalized_at, attempted_by, errors)
         SELECT 1000000 + g, 'completed', 'plans', 'plan.job', '{}', '{}', '{}', 0, 1, 20, now(), now(), now(),
                '{}', '[]'
         FROM generate_series(1, 20000) AS g",
    )
    .execute(&mut conn)
    .await
    .expect("finished jobs");
    let step = |after: Vec<DependsOn>| NewStep {
        job: NewJob::new("plan.step", "plans", "{}"),
        after,
        needs: Needs::Completed,
    };
    let mut steps = vec![step(Vec::new())];
    steps.extend((0..10_000).map(|_| step(vec![DependsOn::Step(0)])));
    let flow = NewWorkflow { name: "fan-out".into(), on_failure: OnFailure::Cancel, steps };
    let inserted = insert_workflow(&mut PgStore(&mut conn), &flow, None).await.expect("insert the workflow");
    // And 30,000 settled edges of 5,000 workflows long done.
    conn.batch_execute(
        "INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome)
         SELECT 1000000 + g, 2000000 + g, 'plan.job', 'completed', 'completed' FROM generate_series(1, 30000) AS g;
         INSERT INTO job_workflows (name, on_failure) SELECT 'done', 'cancel' FROM generate_series(1, 5000)",
    )
    .await
    .expect("settled edges");
    for table in ["jobs", "jobs_archive", "job_dependencies", "job_workflows"] {
        diesel::sql_query(format!("ANALYZE {table}")).execute(&mut conn).await.expect("analyze");
    }
    (inserted.jobs[0].id, conn)
}

async fn prepared_plan(conn: &mut AsyncPgConnection, name: &str, sql: &str, args: &str) -> String {
    diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(&mut *conn).await.expect("prepare");
    // Custom plans: the driver runs these statements unprepared (`sql_query`), so each is
    // planned with its values.
    plan(conn, "force_custom_plan", &format!("{name}({args})")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settle_and_the_sweep_never_scan_finished_jobs() {
    let db = TestDatabase::new().await.expect("database");
    let (root, mut conn) = fan_out(&db).await;
    let ids = format!("ARRAY[{root}]::int8[]");
    let some = format!("ARRAY[{}, {}]::int8[]", root + 1, root + 2);
    let cases = [
        ("sweep", FINISHED_WITH_UNSETTLED, "0, 1000".to_owned(), "job_dependencies_unsettled_idx"),
        ("dependencies_locked", LOCK_DEPENDENCIES_HOT[0], ids.clone(), "jobs_pkey"),
        ("archived_dependencies_locked", LOCK_DEPENDENCIES_ARCHIVED[1], ids.clone(), "jobs_archive_pkey"),
        ("settled_dependents", DEPENDENTS_SETTLED, format!("{ids}, 1000"), "job_dependencies"),
        ("settled_edges_into", SETTLED_EDGES_INTO, some.clone(), "job_dependencies_job_idx"),
        ("dependents", DEPENDENTS_UNSETTLED, format!("{ids}, 1000"), "job_dependencies"),
        ("states", DEPENDENCY_STATES, ids.clone(), "jobs_archive_pkey"),
        ("locked", READ_LOCKED, some.clone(), "jobs_pkey"),
        ("edges", EDGES_UNSETTLED, format!("{ids}, {some}"), "job_dependencies_pkey"),
        (
            "outcome",
            SET_OUTCOME,
            format!("ARRAY[{root}, {root}]::int8[], {some}, 'completed', NULL::jsonb"),
            // By either key (the fixture's dependents each have one edge in).
            "using job_dependencies_",
        ),
    ];
    for (name, sql, args, index) in cases {
        let plans = prepared_plan(&mut conn, name, sql, &args).await;
        assert!(plans.contains(index), "{name} uses {index}:\n{plans}");
        assert!(!plans.contains("Seq Scan on jobs"), "{name} scans jobs:\n{plans}");
        assert!(!plans.contains("Seq Scan"), "{name} scans a table:\n{plans}");
    }
    // The sweep finds nothing to do while the root runs: its edges' dependency is unfinished.
    #[derive(diesel::QueryableByName)]
    struct Found {
        #[diesel(sql_type = BigInt)]
        id: i64,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        finished: bool,
    }
    let found: Vec<Found> = diesel::sql_query(FINISHED_WITH_UNSETTLED)
        .bind::<BigInt, _>(0)
        .bind::<BigInt, _>(1000)
        .load(&mut conn)
        .await
        .expect("sweep");
    assert_eq!(found.iter().map(|f| (f.id, f.finished)).collect::<Vec<_>>(), [(root, false)]);
}
