//! The dashboard on data shaped like a multi-tenant app's, on every backend: 1,200 tenants
//! (each job tagged with its tenant and plan: 1,200 distinct tag sets), 120 kinds, 24
//! queues, every state, errors on the jobs that failed, created over 30 days; the
//! database's statistics taken (`ANALYZE`) as its autovacuum or a DBA would. Every page and
//! every filter the dashboard offers (a tenant, a kind, a queue, alone and with each state,
//! time windows, each sort, error text, an argument search, a filter matching nothing) must
//! answer without a server error. Then a page whose query fails says what failed in the
//! operator's terms, with a reference to the log, and never the database's own text.

use std::sync::Arc;

use actix_web::{App, test};
use chrono::{Duration, Utc};
use jobs_core::IntoDriver;
use jobs_core::driver::{Driver, JobState};
use jobs_core::testing::{MysqlTestDatabase, SqliteTestDatabase, TestDatabase};
use jobs_tests::conformance::factory::{JobFactory, insert_all};

const TENANTS: usize = 1_200;
const KINDS: usize = 120;
const QUEUES: usize = 24;
const JOBS: usize = 24_000;

/// Loads the data: job `i` belongs to tenant `i % TENANTS`, of kind `i % KINDS`, on queue
/// `i % QUEUES`, in a state that changes every 7 jobs (completed a third of the time).
async fn load(driver: &dyn Driver) -> Vec<i64> {
    let now = Utc::now();
    let mut ids = Vec::with_capacity(JOBS);
    let states = [
        JobState::Completed,
        JobState::Completed,
        JobState::Completed,
        JobState::Discarded,
        JobState::Available,
        JobState::Retryable,
        JobState::Scheduled,
        JobState::Cancelled,
        JobState::Running,
    ];
    for chunk in (0..JOBS).collect::<Vec<_>>().chunks(2_000) {
        let jobs = chunk
            .iter()
            .map(|&i| {
                let tenant = i % TENANTS;
                let state = states[(i / 7) % states.len()];
                let created = now - Duration::minutes((i as i64 * 7) % (30 * 24 * 60));
                let at = match state {
                    JobState::Scheduled | JobState::Retryable => {
                        now + Duration::minutes(1 + (i % 600) as i64)
                    }
                    _ => created + Duration::seconds(3),
                };
                let job = JobFactory::new(&format!("app.kind_{:03}", i % KINDS))
                    .queue(&format!("queue_{:02}", i % QUEUES))
                    .args(serde_json::json!({"tenant": tenant, "order": i}))
                    .tag(&format!("tenant_{tenant}"))
                    .tag(&format!("plan_{}", tenant % 3))
                    .created_at(created)
                    .state(state, at);
                match state {
                    JobState::Discarded | JobState::Retryable => {
                        job.error("timeout", &format!("upstream {} timed out after 30 s", i % 17))
                    }
                    _ => job,
                }
            })
            .collect();
        ids.extend(insert_all(driver, jobs).await);
    }
    ids
}

/// Every page and filter the dashboard offers, on this data.
fn urls(ids: &[i64]) -> Vec<String> {
    let states = ["available", "scheduled", "retryable", "running", "completed", "discarded", "cancelled"];
    let mut urls: Vec<String> =
        ["/jobs/", "/jobs/jobs", "/jobs/queues", "/jobs/kinds", "/jobs/cron", "/jobs/jobs/new"]
            .map(String::from)
            .to_vec();
    let week_ago = (Utc::now() - Duration::days(7)).format("%Y-%m-%d");
    let rare = [
        ("tag", "tenant_977".to_owned()),
        ("kind", "app.kind_042".to_owned()),
        ("queue", "queue_13".to_owned()),
        ("tag", "tenant_nobody".to_owned()),
        ("kind", "app.unknown".to_owned()),
    ];
    for state in states {
        urls.push(format!("/jobs/jobs?state={state}"));
        for (key, value) in &rare {
            urls.push(format!("/jobs/jobs?state={state}&{key}={value}"));
        }
        for sort in ["newest", "oldest", "due", "finished"] {
            urls.push(format!("/jobs/jobs?state={state}&sort={sort}"));
        }
        urls.push(format!("/jobs/jobs?state={state}&from={week_ago}"));
    }
    for (key, value) in &rare {
        urls.push(format!("/jobs/jobs?{key}={value}"));
        urls.push(format!("/jobs/jobs?{key}={value}&sort=oldest"));
        urls.push(format!("/jobs/jobs?{key}={value}&from={week_ago}"));
    }
    for sort in ["newest", "oldest", "due", "finished"] {
        urls.push(format!("/jobs/jobs?sort={sort}"));
    }
    urls.extend([
        "/jobs/jobs?state=discarded&state=retryable&tag=tenant_5&kind=app.kind_005".to_owned(),
        format!("/jobs/jobs?from={week_ago}&to={}", Utc::now().format("%Y-%m-%d")),
        "/jobs/jobs?q=timed+out".to_owned(),
        "/jobs/jobs?state=discarded&q=upstream+3".to_owned(),
        "/jobs/jobs?q=tenant%3D977".to_owned(),
        format!("/jobs/jobs?before={}", ids[ids.len() / 2]),
        format!("/jobs/jobs?state=completed&before={}", ids[ids.len() / 3]),
        "/jobs/kinds?window=1h".to_owned(),
        "/jobs/kinds?window=24h".to_owned(),
    ]);
    urls.extend(ids.iter().step_by(ids.len() / 7).map(|id| format!("/jobs/jobs/{id}")));
    urls
}

/// Loads every URL and asserts none is a server error.
async fn every_page_answers(driver: Arc<dyn Driver>, ids: &[i64]) {
    let config = jobs_dashboard::DashboardConfig::new(driver);
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let urls = urls(ids);
    let mut failed = Vec::new();
    for url in &urls {
        let response = test::call_service(&app, test::TestRequest::get().uri(url).to_request()).await;
        let status = response.status();
        if status.is_server_error() {
            let body = String::from_utf8_lossy(&test::read_body(response).await).into_owned();
            failed.push(format!("{url}: {status}: {}", body.chars().take(400).collect::<String>()));
        }
    }
    println!("{} pages and filters loaded, {} server errors", urls.len(), failed.len());
    assert!(failed.is_empty(), "server errors:\n{}", failed.join("\n"));
}

/// A tenant's page: counted through an index where the driver has one of tags, else read a
/// window of ids at a time, saying so (counting one tenant of thousands would read every
/// job). Either way it lists the tenant's jobs.
async fn a_tenant_is_counted_or_windowed(driver: Arc<dyn Driver>, windowed: bool) {
    let config = jobs_dashboard::DashboardConfig::new(driver);
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let request = test::TestRequest::get().uri("/jobs/jobs?tag=tenant_977").to_request();
    let body =
        String::from_utf8_lossy(&test::read_body(test::call_service(&app, request).await).await).into_owned();
    assert_eq!(body.contains("id=\"searched\""), windowed, "{body}");
    assert_eq!(body.contains("keeps no index of tags"), windowed, "{body}");
    assert!(body.contains("<tr class=\"state-"), "the tenant's jobs are listed: {body}");
}

#[actix_web::test]
async fn every_page_and_filter_answers_on_many_tenants_and_kinds_on_postgres() {
    let db = TestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver").into_driver();
    let ids = load(&*driver).await;
    let mut conn = db.connect().await.expect("connect");
    diesel_async::RunQueryDsl::execute(diesel::sql_query("ANALYZE jobs"), &mut conn).await.expect("analyze");
    every_page_answers(driver.clone(), &ids).await;
    a_tenant_is_counted_or_windowed(driver, false).await;
}

#[actix_web::test]
async fn every_page_and_filter_answers_on_many_tenants_and_kinds_on_sqlite() {
    let db = SqliteTestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver").into_driver();
    let ids = load(&*driver).await;
    let mut conn = db.connect().await.expect("connect");
    diesel_async::RunQueryDsl::execute(diesel::sql_query("ANALYZE"), &mut conn).await.expect("analyze");
    every_page_answers(driver.clone(), &ids).await;
    a_tenant_is_counted_or_windowed(driver.clone(), true).await;

    // A page whose query fails (here: its table is gone) says so in the operator's terms.
    diesel_async::RunQueryDsl::execute(diesel::sql_query("ALTER TABLE jobs RENAME TO jobs_gone"), &mut conn)
        .await
        .expect("rename");
    let config = jobs_dashboard::DashboardConfig::new(driver);
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let response = test::call_service(&app, test::TestRequest::get().uri("/jobs/jobs").to_request()).await;
    assert!(response.status().is_server_error(), "{}", response.status());
    let reference =
        response.headers().get("x-jobs-error-reference").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = String::from_utf8_lossy(&test::read_body(response).await).into_owned();
    let reference = reference.expect("a server error carries a reference");
    assert!(body.contains("The jobs database could not answer this request."), "{body}");
    assert!(body.contains(&format!("under reference {reference}")), "{body}");
    assert!(
        !body.to_lowercase().contains("no such table"),
        "the database's own text stays in the log: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_and_filter_answers_on_many_tenants_and_kinds_on_mysql_or_mariadb() {
    let db = MysqlTestDatabase::new().await.expect("database");
    let driver = db.driver(4).expect("driver").into_driver();
    let ids = load(&*driver).await;
    let mut conn = <diesel_async::AsyncMysqlConnection as diesel_async::AsyncConnection>::establish(db.url())
        .await
        .expect("connect");
    diesel_async::RunQueryDsl::execute(diesel::sql_query("ANALYZE TABLE jobs"), &mut conn)
        .await
        .expect("analyze");
    every_page_answers(driver.clone(), &ids).await;
    a_tenant_is_counted_or_windowed(driver, true).await;
}
