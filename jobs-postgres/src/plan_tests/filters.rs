//! Plan tests of the dashboard's filters by kind and by tag among many archived jobs: one
//! kind's failed jobs or one tenant of many must be counted and paged through its archive
//! index, never by walking the archive; and a count that would take long is estimated.

use diesel::QueryDsl;
use std::time::Duration;

use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_driver::{Count, JobFilter, JobState};

use super::page_plan_with;
use crate::jobs::list::{count_within, filtered};
use crate::schema::jobs_all;
use crate::testing::TestDatabase;
use crate::testing::explain::explain_execute;

/// 40,000 archived jobs of 40 kinds and 400 tenants (a tag each), and statistics.
async fn many_kinds_and_tenants(db: &TestDatabase) -> AsyncPgConnection {
    let mut conn = db.connect().await.expect("connect");
    diesel::sql_query(
        "INSERT INTO jobs_archive (id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts,
                                   created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors)
         SELECT g, CASE WHEN g % 100 = 0 THEN 'discarded' ELSE 'completed' END::job_state, 'default',
                'kind_' || (g % 40), '{}', '{}', ARRAY['tenant_' || (g * 7 % 400)], 0, 1, 20,
                now() - (40000 - g) * interval '1 s', now(), now(), now(), '{n}', '[]'
         FROM generate_series(1, 40000) AS g",
    )
    .execute(&mut conn)
    .await
    .expect("load");
    diesel::sql_query("SELECT setval(pg_get_serial_sequence('jobs', 'id'), 40000)")
        .execute(&mut conn)
        .await
        .expect("sequence");
    diesel::sql_query("VACUUM ANALYZE jobs, jobs_archive").execute(&mut conn).await.expect("analyze");
    conn
}

/// The plan of the count the dashboard runs for `filter` (its ids up to the cap).
async fn count_plan(conn: &mut AsyncPgConnection, filter: &JobFilter, name: &str, args: &str) -> String {
    let query = filtered(filter).select(jobs_all::id).limit(10_001);
    let sql = diesel::debug_query::<diesel::pg::Pg, _>(&query).to_string();
    let sql = sql.split(" -- binds:").next().unwrap_or_default().to_owned();
    diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(conn).await.expect("prepare");
    explain_execute(conn, &format!("{name}({args})")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinds_failures_or_a_tenant_are_counted_through_their_archive_index() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = many_kinds_and_tenants(&db).await;
    let kind =
        JobFilter { kind: Some("kind_7".into()), states: vec![JobState::Discarded], ..JobFilter::default() };
    let plan = count_plan(&mut conn, &kind, "kind_count", "'kind_7', 10001").await;
    assert!(plan.contains("jobs_archive_kind_idx") && !plan.contains("Seq Scan on jobs_archive"), "{plan}");
    let tenant = JobFilter { tag: Some("tenant_7".into()), ..JobFilter::default() };
    let plan = count_plan(&mut conn, &tenant, "tag_count", "'{tenant_7}', 10001").await;
    assert!(plan.contains("jobs_archive_tags_idx") && !plan.contains("Seq Scan on jobs_archive"), "{plan}");
    let failed =
        JobFilter { tag: Some("tenant_7".into()), states: vec![JobState::Discarded], ..JobFilter::default() };
    let plan = count_plan(&mut conn, &failed, "tag_failed_count", "'{tenant_7}', 10001").await;
    assert!(!plan.contains("Seq Scan on jobs_archive"), "{plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kinds_failures_in_a_created_window_are_a_range_of_its_archive_index() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = many_kinds_and_tenants(&db).await;
    let now = chrono::Utc::now();
    let filter = JobFilter {
        kind: Some("kind_7".into()),
        states: vec![JobState::Discarded, JobState::Cancelled],
        from: Some(now - chrono::Duration::hours(6)),
        to: Some(now - chrono::Duration::hours(5)),
        ..JobFilter::default()
    };
    let (from, to) = (filter.from.unwrap_or(now).to_rfc3339(), filter.to.unwrap_or(now).to_rfc3339());
    let plan =
        count_plan(&mut conn, &filter, "kind_window", &format!("'kind_7', '{from}', '{to}', 10001")).await;
    assert!(plan.contains("jobs_archive_kind_idx") && !plan.contains("Seq Scan on jobs_archive"), "{plan}");
    let plan =
        page_plan_with(&mut conn, &filter, "kind_window_page", &format!("'kind_7', '{from}', '{to}', 50"))
            .await;
    assert!(!plan.contains("Seq Scan on jobs_archive"), "{plan}");
}

/// A count that would take longer than its budget is the planner's estimate, in the
/// budget: here another transaction holds the archive locked, and counting would wait for
/// as long as it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_past_its_budget_is_the_estimate() {
    let db = TestDatabase::new().await.expect("database");
    let mut conn = many_kinds_and_tenants(&db).await;
    let filter =
        JobFilter { kind: Some("kind_7".into()), states: vec![JobState::Completed], ..JobFilter::default() };
    let exact = count_within(&mut conn, &filter, 10_000, true, Duration::from_secs(30)).await.expect("count");
    assert_eq!(exact, Count::Exact(1000));
    let mut locker = db.connect().await.expect("connect");
    diesel::sql_query("BEGIN").execute(&mut locker).await.expect("begin");
    diesel::sql_query("LOCK TABLE jobs_archive IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .expect("lock");
    let budgeted = count_within(&mut conn, &filter, 10_000, true, Duration::from_millis(50));
    let counted = tokio::time::timeout(Duration::from_secs(10), budgeted).await;
    diesel::sql_query("ROLLBACK").execute(&mut locker).await.expect("rollback");
    match counted {
        Ok(Ok(Count::Estimate(n))) => assert!((500..2_000).contains(&n), "estimated {n} of 1,000"),
        other => panic!("a count past its budget answered {other:?}, not the estimate"),
    }
    // Without estimates (the caller wants the count), it is exact whatever it takes.
    let exact =
        count_within(&mut conn, &filter, 10_000, false, Duration::from_millis(50)).await.expect("count");
    assert_eq!(exact, Count::Exact(1000));
}
