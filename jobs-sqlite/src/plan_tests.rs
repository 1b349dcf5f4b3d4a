//! Plan tests: the hot statements must find their rows through the primary key or the
//! index made for them, whatever the statistics say, never by scanning the table or by
//! re-walking a batch per row.

use diesel::sql_types::Text;
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::NewJob;

use crate::jobs::claim::CLAIM;
use crate::jobs::complete::{COMPLETE_SUCCEEDED, DELETE_COMPLETED};
use crate::jobs::insert::insert_many_sync;
use crate::jobs::list::page_sql;
use crate::pool::connect_sync;
use crate::testing::TestDatabase;

#[derive(QueryableByName)]
struct Step {
    #[diesel(sql_type = Text)]
    detail: String,
}

/// The plan of `sql` (with `$n` parameters, left unbound), one step per line.
fn explain(conn: &mut SqliteConnection, sql: &str) -> String {
    let numbered = sql.replace('$', "?").replace("'?[", "'$[");
    let steps: Vec<Step> =
        diesel::sql_query(format!("EXPLAIN QUERY PLAN {numbered}")).load(conn).expect("explain");
    steps.into_iter().map(|s| s.detail).collect::<Vec<_>>().join("\n")
}

/// A database of 20,000 available jobs, its statistics gathered then (when no job ran:
/// they say `jobs_running_idx` is empty), and 400 running ones since.
async fn busy_queue() -> (TestDatabase, SqliteConnection) {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = connect_sync(db.path()).expect("connect");
    let batch: Vec<NewJob> = (0..5_000).map(|_| NewJob::new("plan.job", "plans", "{}")).collect();
    for _ in 0..4 {
        insert_many_sync(&mut conn, &batch, 0).expect("insert");
    }
    diesel::sql_query("ANALYZE").execute(&mut conn).expect("analyze");
    crate::jobs::claim::claim(&mut conn, "plans", 400, "planner", 1).expect("claim");
    (db, conn)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_reads_the_claim_index() {
    let (_db, mut conn) = busy_queue().await;
    let plan = explain(&mut conn, CLAIM);
    assert!(plan.contains("jobs_claim_idx"), "{plan}");
    assert!(!plan.lines().any(|l| l.starts_with("SCAN jobs")), "{plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_find_each_row_by_its_id() {
    let (_db, mut conn) = busy_queue().await;
    for sql in [COMPLETE_SUCCEEDED, DELETE_COMPLETED] {
        let plan = explain(&mut conn, sql);
        assert!(plan.contains("USING INTEGER PRIMARY KEY"), "{plan}");
        assert!(!plan.contains("jobs_running_idx") && !plan.lines().any(|l| l.contains("SCAN j")), "{plan}");
    }
}

/// A page of one resting state, of a queue or of all queues, reads a partial index (they
/// hold few rows), not the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_a_resting_state_read_its_partial_index() {
    let (_db, mut conn) = busy_queue().await;
    for (states, queue) in [
        (vec![jobs_driver::JobState::Discarded], Some("plans")),
        (vec![jobs_driver::JobState::Retryable, jobs_driver::JobState::Discarded], Some("plans")),
        (vec![jobs_driver::JobState::Completed], Some("plans")),
    ] {
        let filter = jobs_driver::JobFilter {
            states: states.clone(),
            queue: queue.map(str::to_owned),
            ..Default::default()
        };
        let plan = explain(&mut conn, &page_sql(&filter));
        assert!(
            plan.contains("jobs_queue_state_idx") || plan.contains("jobs_finalized_idx"),
            "{states:?} {queue:?}:\n{plan}"
        );
    }
}

/// Completed jobs, most of a table that keeps every finished job, are paged by id: the
/// first rows of the table in id order, never every completed job sorted (0.86 s a page at
/// 1 M jobs through `jobs_finalized_idx`); so are they with a kind or with other states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_completed_jobs_read_the_table_in_id_order() {
    use jobs_driver::{JobOrder, JobState};
    let (_db, mut conn) = busy_queue().await;
    for (states, kind, order) in [
        (vec![JobState::Completed], None, JobOrder::NewestFirst),
        (vec![JobState::Completed, JobState::Discarded], None, JobOrder::NewestFirst),
        (vec![JobState::Completed], Some("plans.kind"), JobOrder::OldestFirst),
    ] {
        let filter = jobs_driver::JobFilter {
            states: states.clone(),
            kind: kind.map(str::to_owned),
            order,
            ..Default::default()
        };
        let plan = explain(&mut conn, &page_sql(&filter));
        assert!(!plan.contains("TEMP B-TREE"), "{states:?} {kind:?}:\n{plan}");
        assert!(!plan.contains("jobs_finalized_idx"), "{states:?} {kind:?}:\n{plan}");
    }
}

/// The workflow statements find their rows by key: a settle reads the rows of the jobs it
/// settles, and the settler's sweep reads the unsettled edges' index and looks each
/// dependency up by its key, never reading the finished jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_statements_read_by_key() {
    use crate::workflows::statements::{
        DEPENDENCY_STATES, DEPENDENTS_SETTLED, DEPENDENTS_UNSETTLED, EDGES_UNSETTLED,
        FINISHED_WITH_UNSETTLED, READ_LOCKED, SET_OUTCOME, SETTLED_EDGES_INTO,
    };
    let (_db, mut conn) = busy_queue().await;
    diesel::sql_query(
        "INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome)
         SELECT value, value + 1, 'plan.job', 'completed', CASE WHEN value % 4 = 0 THEN NULL ELSE 'completed' END
         FROM json_each((SELECT json_group_array(id) FROM jobs))",
    )
    .execute(&mut conn)
    .expect("edges");
    diesel::sql_query("ANALYZE").execute(&mut conn).expect("analyze");
    for (name, sql) in [
        ("sweep", FINISHED_WITH_UNSETTLED),
        ("dependents", DEPENDENTS_UNSETTLED),
        ("settled dependents", DEPENDENTS_SETTLED),
        ("settled edges into", SETTLED_EDGES_INTO),
        ("states", DEPENDENCY_STATES),
        ("locked", READ_LOCKED),
        ("edges", EDGES_UNSETTLED),
        ("outcome", SET_OUTCOME),
    ] {
        let plan = explain(&mut conn, sql);
        let scans = |table: &str| {
            plan.lines().any(|l| l.starts_with(&format!("SCAN {table}")) && !l.contains("INDEX"))
        };
        assert!(!scans("jobs") && !scans("j"), "{name} scans jobs:\n{plan}");
        assert!(!scans("job_dependencies"), "{name} scans the edges:\n{plan}");
    }
}
