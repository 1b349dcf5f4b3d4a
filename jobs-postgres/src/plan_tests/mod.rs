//! Plan tests: the hot statements (claim, completion) and the dashboard's pages must stay
//! on their indexes, whatever the statistics say.

use diesel::sql_types::Text;
use diesel::{QueryDsl, QueryableByName};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_driver::{JobFilter, JobListParams, JobOrder, JobState, NewJob};

use crate::jobs::claim::{FETCH_AVAILABLE, fetch_available, fetch_batch};
use crate::jobs::complete::{COMPLETE_HELD, COMPLETE_SQL, COMPLETE_SUCCEEDED, DELETE_COMPLETED};
use crate::jobs::insert::insert_many;
use crate::jobs::list::QUEUE_INDEXED_STATES;
use crate::jobs::page::{list, page};
use crate::testing::TestDatabase;
use crate::testing::explain::explain_execute;

mod filters;
mod partitions;
mod workflows;

async fn plan(conn: &mut AsyncPgConnection, mode: &str, execute: &str) -> String {
    diesel::sql_query(format!("SET plan_cache_mode = {mode}")).execute(conn).await.expect("set mode");
    explain_execute(conn, execute).await
}

async fn queue_of_20_000(db: &TestDatabase) -> AsyncPgConnection {
    let mut conn = db.connect().await.expect("connect");
    let batch: Vec<NewJob> = (0..5_000).map(|_| NewJob::new("plan.job", "plans", "{}")).collect();
    for _ in 0..4 {
        insert_many(&mut conn, &batch, None).await.expect("insert");
    }
    diesel::sql_query("ANALYZE jobs").execute(&mut conn).await.expect("analyze");
    conn
}

/// The claim's generic plan, the one a prepared statement reuses, must not depend on the
/// batch size: index scans only, never a pass over the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_plan_reads_only_what_it_claims() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = queue_of_20_000(&db).await;
    diesel::sql_query(format!("PREPARE claim AS {FETCH_AVAILABLE}"))
        .execute(&mut conn)
        .await
        .expect("prepare");
    for mode in ["force_generic_plan", "force_custom_plan"] {
        let plan = plan(&mut conn, mode, "claim('plans', 100, 'planner', NULL)").await;
        assert!(
            plan.contains("jobs_claim_idx") && plan.contains("jobs_pkey") && !plan.contains("Seq Scan"),
            "{mode}:\n{plan}"
        );
    }
}

#[derive(diesel::QueryableByName)]
struct PlanCounts {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    generic_plans: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    custom_plans: i64,
}

async fn plan_counts(conn: &mut AsyncPgConnection, needle: &str) -> PlanCounts {
    diesel::sql_query(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%'",
    )
    .bind::<diesel::sql_types::Text, _>(needle)
    .get_result(conn)
    .await
    .expect("the claim is a prepared statement")
}

/// A claim of a queue's batch size is planned once per connection and reused; the same
/// claim with the size as a parameter is planned afresh every time (its generic plan
/// guesses a tenth of the table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_claim_reuses_its_plan() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = queue_of_20_000(&db).await;
    for _ in 0..8 {
        assert_eq!(fetch_batch(&mut conn, "plans", 37, "planner", None).await.expect("claim").len(), 37);
        assert_eq!(fetch_available(&mut conn, "plans", 37, "planner", None).await.expect("claim").len(), 37);
    }
    let batch = plan_counts(&mut conn, "LIMIT 37").await;
    assert!(batch.generic_plans >= 2, "generic {} custom {}", batch.generic_plans, batch.custom_plans);
    // diesel numbers the placeholders in the order they appear.
    let any = plan_counts(&mut conn, "LIMIT $").await;
    assert_eq!((any.generic_plans, any.custom_plans), (0, 8), "the parameterised claim is planned each time");
}

/// Statistics gathered while nothing ran say `jobs_running_idx` is empty; a plan that
/// trusted them scanned it once per batch row. Every completion statement must find
/// its rows by primary key instead, in generic and custom plans alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_plans_use_the_primary_key_whatever_the_statistics() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = queue_of_20_000(&db).await;
    let claimed = fetch_available(&mut conn, "plans", 500, "planner", None).await.expect("claim");
    assert_eq!(claimed.len(), 500);

    let statements = [
        ("succeeded", COMPLETE_SUCCEEDED, "succeeded('{1}', '{1}', '{NULL}', NULL)"),
        ("held", COMPLETE_HELD, "held('{1}', '{1}', '{NULL}', NULL)"),
        ("deleted", DELETE_COMPLETED, "deleted('{1}', '{1}')"),
        (
            "other",
            COMPLETE_SQL.as_str(),
            "other('{1}', '{1}', '{retryable}', '{NULL}', '{NULL}', '{NULL}', '{0}', NULL)",
        ),
    ];
    for (name, sql, execute) in statements {
        diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(&mut conn).await.expect("prepare");
        let generic = plan(&mut conn, "force_generic_plan", execute).await;
        assert!(
            generic.contains("jobs_pkey") && !generic.contains("jobs_running_idx"),
            "{name}, generic plan:\n{generic}"
        );
        let custom = plan(&mut conn, "force_custom_plan", execute).await;
        assert!(!custom.contains("jobs_running_idx"), "{name}, custom plan:\n{custom}");
    }
}

#[derive(QueryableByName)]
struct Line {
    #[diesel(sql_type = Text)]
    line: String,
}

/// 20,000 jobs on a busy queue, half of them completed (and archived), half waiting; then
/// one job in each state on a small one.
async fn a_small_queue_among_a_busy_one(db: &TestDatabase) -> AsyncPgConnection {
    let mut conn = db.connect().await.expect("connect");
    let busy: Vec<NewJob> = (0..5_000).map(|_| NewJob::new("plan.job", "busy", "{}")).collect();
    for _ in 0..4 {
        insert_many(&mut conn, &busy, None).await.expect("insert");
    }
    let small: Vec<NewJob> = JobState::ALL.iter().map(|_| NewJob::new("plan.job", "small", "{}")).collect();
    insert_many(&mut conn, &small, None).await.expect("insert");
    // Move the rows into their states the way the components would have left them.
    diesel::sql_query(
        "UPDATE jobs SET state = 'completed', attempt = 1, attempted_at = now(), finalized_at = now()
         WHERE queue = 'busy' AND id % 2 = 0",
    )
    .execute(&mut conn)
    .await
    .expect("complete");
    diesel::sql_query(
        "UPDATE jobs SET state = s.state, attempt = 1, attempted_at = now(),
                finalized_at = CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN now() END
         FROM (SELECT id, (enum_range(NULL::job_state))[row_number() OVER (ORDER BY id)] AS state
               FROM jobs WHERE queue = 'small') AS s
         WHERE jobs.id = s.id",
    )
    .execute(&mut conn)
    .await
    .expect("spread");
    archive_and_analyze(&mut conn).await;
    conn
}

/// Moves the finished rows into the archive, as the archiver would, and gathers both
/// tables' statistics.
async fn archive_and_analyze(conn: &mut AsyncPgConnection) {
    crate::jobs::archive::archive(conn, jobs_driver::JobArchiveParams { limit: 100_000 })
        .await
        .expect("archive");
    diesel::sql_query("VACUUM ANALYZE jobs, jobs_archive").execute(conn).await.expect("analyze");
}

/// The plan of the jobs page for `filter`, as `EXPLAIN` prints it, with `args` for the
/// page query's parameters.
async fn page_plan_with(conn: &mut AsyncPgConnection, filter: &JobFilter, name: &str, args: &str) -> String {
    let query = page(filter, None, 50).select(crate::schema::jobs_all::id);
    let sql = diesel::debug_query::<diesel::pg::Pg, _>(&query).to_string();
    let sql = sql.split(" -- binds:").next().unwrap_or_default().to_owned();
    diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(conn).await.expect("prepare");
    explain_execute(conn, &format!("{name}({args})")).await
}

/// The plan of a queue filter's jobs page.
async fn page_plan(conn: &mut AsyncPgConnection, filter: &JobFilter, name: &str) -> String {
    let queue = filter.queue.as_deref().unwrap_or_default();
    page_plan_with(conn, filter, name, &format!("'{queue}', 50")).await
}

/// The queue index leaves out available and running jobs; a small queue's page, in
/// every state or in some, must still be read through indexes, never by walking the
/// whole table, and must list the jobs in every state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_queue_is_read_through_its_indexes_in_every_state() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = a_small_queue_among_a_busy_one(&db).await;
    let every = JobFilter { queue: Some("small".into()), ..JobFilter::default() };
    let listed =
        list(&mut conn, JobListParams { filter: &every, before: None, limit: 50 }).await.expect("list");
    let mut states: Vec<JobState> = listed.iter().map(|j| j.state).collect();
    states.sort_by_key(|s| s.as_str());
    let mut all = JobState::ALL.to_vec();
    all.sort_by_key(|s| s.as_str());
    assert_eq!(states, all);

    let some = JobFilter {
        queue: Some("small".into()),
        states: vec![JobState::Available, JobState::Completed, JobState::Running],
        ..JobFilter::default()
    };
    for (name, filter) in [("every_state", &every), ("some_states", &some)] {
        let plan = page_plan(&mut conn, filter, name).await;
        assert!(
            !plan.contains("Seq Scan")
                && !plan.contains("jobs_pkey")
                && plan.contains("jobs_queue_state_idx")
                && plan.contains("jobs_archive_queue_state_idx"),
            "{name}:\n{plan}"
        );
    }
}

/// `QUEUE_INDEXED_STATES` is what the migration's index holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_index_holds_the_states_the_dashboard_expects() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = db.connect().await.expect("connect");
    let def: Line = diesel::sql_query(
        "SELECT indexdef AS line FROM pg_indexes WHERE indexname = 'jobs_queue_state_idx' AND schemaname = current_schema()",
    )
    .get_result(&mut conn)
    .await
    .expect("index");
    for state in JobState::ALL {
        let quoted = format!("'{}'", state.as_str());
        assert_eq!(
            def.line.contains(&quoted),
            QUEUE_INDEXED_STATES.contains(&state),
            "{state:?} in {}",
            def.line
        );
    }
}

/// A created from/to window deep in the table is read from `jobs_archive_created_idx` (and
/// `jobs_created_idx`, for finished jobs not archived yet) at the window's edge, in both
/// directions: never by walking the ids newer (or older) than it, and never by sorting the
/// window's finished jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_window_is_read_from_its_edge() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = queue_of_20_000(&db).await;
    // One job a second, the newest now; all but the newest hundred finished.
    diesel::sql_query(
        "UPDATE jobs SET created_at = now() - (SELECT max(id) FROM jobs) * interval '1 second' + id * interval '1 second',
                state = CASE WHEN id <= (SELECT max(id) - 100 FROM jobs) THEN 'completed'::job_state ELSE state END,
                finalized_at = CASE WHEN id <= (SELECT max(id) - 100 FROM jobs) THEN now() END",
    )
    .execute(&mut conn)
    .await
    .expect("spread");
    archive_and_analyze(&mut conn).await;
    let now = chrono::Utc::now();
    let window = JobFilter {
        from: Some(now - chrono::Duration::seconds(15_000)),
        to: Some(now - chrono::Duration::seconds(5_000)),
        ..JobFilter::default()
    };
    let args = "now() - interval '15000 seconds', now() - interval '5000 seconds', 50";
    for order in [JobOrder::NewestFirst, JobOrder::OldestFirst] {
        // The finished jobs' page; the others' are read through their states' indexes.
        let finished = JobFilter { order, states: vec![JobState::Completed], ..window.clone() };
        let name = format!("window_{order:?}").to_lowercase();
        let plan = page_plan_with(&mut conn, &finished, &name, args).await;
        assert!(
            plan.contains("jobs_archive_created_idx")
                && !plan.contains("jobs_pkey")
                && !plan.contains("Sort  (")
                && !plan.contains("Seq Scan"),
            "{order:?}:\n{plan}"
        );
        // Pages of every state follow one another without a gap or a repeat.
        let filter = JobFilter { order, ..window.clone() };
        let first =
            list(&mut conn, JobListParams { filter: &filter, before: None, limit: 50 }).await.expect("list");
        let cursor = first.last().map(|j| j.id);
        let second = list(&mut conn, JobListParams { filter: &filter, before: cursor, limit: 50 })
            .await
            .expect("list");
        let ids: Vec<i64> = first.iter().chain(&second).map(|j| j.id).collect();
        let step = if order == JobOrder::NewestFirst { -1 } else { 1 };
        assert_eq!(ids.len(), 100, "{order:?}");
        assert!(ids.windows(2).all(|w| w[1] - w[0] == step), "{order:?}: {ids:?}");
        // The cursor job pruned before the next page is asked for: the page goes on from
        // its id rather than coming back empty.
        let gone = second.last().map(|j| j.id).expect("a cursor");
        diesel::sql_query(format!("DELETE FROM jobs_archive WHERE id = {gone}"))
            .execute(&mut conn)
            .await
            .expect("prune");
        let third = list(&mut conn, JobListParams { filter: &filter, before: Some(gone), limit: 5 })
            .await
            .expect("list");
        let next: Vec<i64> = third.iter().map(|j| j.id).collect();
        assert_eq!(next, (1..=5).map(|n| gone + n * step).collect::<Vec<_>>(), "{order:?}");
    }
}
