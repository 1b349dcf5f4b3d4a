//! Operator tools: enqueue from the dashboard (kinds that live nodes run, arguments checked
//! as JSON and, for kinds registered in this process, as their type), and the audit hook
//! that every action calls with who did what.

mod test_app;

use std::sync::{Arc, Mutex};

use actix_web::http::StatusCode;
use actix_web::{App, test};
use jobs_core::testing::TestDatabase;
use jobs_core::{JobContext, JobState, job};
use jobs_dashboard::{AuditEvent, DashboardConfig};
use serde::{Deserialize, Serialize};
use test_app::{fail, get, insert, new_job, post_full, state_of, token};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Invoice {
    order_id: i64,
}

#[job(kind = "operator.invoice", queue = "billing", max_attempts = 4, timeout = "30s", tags = ["invoices"])]
async fn invoice(_ctx: JobContext, _args: Invoice) -> Result<(), std::io::Error> {
    Ok(())
}

/// The options `mail`'s node declares: a kind this process does not register, which the
/// dashboard knows only from the node's heartbeat.
fn mail_options() -> jobs_core::JobOptions {
    jobs_core::JobOptions::new()
        .queue("mailers")
        .priority(5)
        .max_attempts(3)
        .timeout(std::time::Duration::from_secs(10))
        .tag("mail")
        .unique(jobs_core::UniqueOptions::new(jobs_core::UniqueBy::Fields(vec!["to".into()])))
}

/// A live node that runs `operator.invoice` on `billing`, and `mail` on `mailers`.
async fn live_node(pool: &jobs_core::postgres::Pool) {
    let queues =
        serde_json::json!({"billing": {"limit": 5, "running": 0}, "mailers": {"limit": 5, "running": 0}});
    let options = serde_json::json!({ "mail": mail_options().to_published() });
    test_app::live_node(pool, queues, &["operator.invoice", "mail"], options).await;
}

#[actix_web::test]
async fn enqueue_from_the_dashboard_checks_kind_and_arguments() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    let (_, body, _) = get(&app, "/admin/jobs/jobs/new").await;
    assert!(body.contains(r#"id="no-kinds""#), "no live node, nothing to offer: {body}");

    live_node(&pool).await;
    let (status, body, _) = get(&app, "/admin/jobs/jobs/new?kind=operator.invoice").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains(
            r#"<option value="operator.invoice" selected>operator.invoice (on billing, mailers)</option>"#
        ),
        "{body}"
    );
    assert!(
        body.contains(r#"id="enqueue-queue" list="served-queues" value="billing""#),
        "its default queue: {body}"
    );
    let csrf = token(&app).await;

    let tries: [(&[(&str, &str)], &str); 4] = [
        (
            &[("kind", "nobody.runs.this"), ("queue", "billing"), ("args", "{}")],
            "no live node runs kind `nobody.runs.this`",
        ),
        (
            &[("kind", "operator.invoice"), ("queue", "billing"), ("args", "{order_id: 1")],
            "the arguments are not valid JSON",
        ),
        (
            &[("kind", "operator.invoice"), ("queue", "billing"), ("args", r#"{"order_id": "seven"}"#)],
            "the arguments do not decode as",
        ),
        (&[("kind", "operator.invoice"), ("queue", ""), ("args", r#"{"order_id": 7}"#)], "queue"),
    ];
    for (fields, says) in tries {
        let posted = post_full(&app, "/admin/jobs/jobs/new", Some(&csrf), fields).await;
        assert_eq!(posted.status, StatusCode::BAD_REQUEST, "{fields:?}");
        assert!(
            posted.body.contains(r#"id="form-error""#) && posted.body.contains(says),
            "{says}: {}",
            posted.body
        );
        assert!(posted.body.contains(r#"id="enqueue-args""#), "the form again, as typed");
    }
    let all = jobs_core::JobFilter::default();
    let count = test_app::driver(&pool)
        .job_count(jobs_core::driver::JobCountParams { filter: &all, cap: 100 })
        .await
        .expect("count");
    assert_eq!(count, jobs_core::Count::Exact(0), "nothing enqueued by a bad form");

    let fields = [
        ("kind", "operator.invoice"),
        ("queue", "billing"),
        ("args", r#"{"order_id": 7}"#),
        ("priority", "2"),
    ];
    let posted = post_full(&app, "/admin/jobs/jobs/new", Some(&csrf), &fields).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    let id: i64 =
        posted.location.rsplit('/').next().and_then(|id| id.parse().ok()).expect("the new job's page");
    assert_eq!(posted.notice.as_deref(), Some(format!("job {id} enqueued").as_str()));
    let job = test_app::driver(&pool)
        .job_get(jobs_core::driver::JobGetParams { id })
        .await
        .expect("read")
        .expect("the job");
    assert_eq!((job.kind.as_str(), job.queue.as_str(), job.priority), ("operator.invoice", "billing", 2));
    assert_eq!(job.args, serde_json::json!({"order_id": 7}));
    assert_eq!(
        (job.max_attempts, job.timeout_ms, job.tags.clone()),
        (4, Some(30_000), vec!["invoices".to_owned()]),
        "the kind's #[job] options where the form says nothing"
    );
    // Without the CSRF token, nothing.
    assert_eq!(post_full(&app, "/admin/jobs/jobs/new", None, &fields).await.status, StatusCode::FORBIDDEN);
}

/// A kind this process does not link (the dashboard served on its own) is enqueued with
/// the options its live node declares: queue, attempts, timeout, priority, tags, and its
/// uniqueness key (a second enqueue of the same recipient finds the first job).
#[actix_web::test]
async fn the_form_enqueues_a_kind_with_the_options_its_node_declares() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    live_node(&pool).await;
    let (_, body, _) = get(&app, "/admin/jobs/jobs/new?kind=mail").await;
    assert!(body.contains(r#"id="enqueue-queue" list="served-queues" value="mailers""#), "its queue: {body}");
    assert!(
        body.contains("priority 5, 3 attempts; timeout 10s; tags mail; unique by to"),
        "what blank fields take: {body}"
    );
    let csrf = token(&app).await;
    let fields = [("kind", "mail"), ("queue", "mailers"), ("args", r#"{"to": "ann@example.com"}"#)];
    let posted = post_full(&app, "/admin/jobs/jobs/new", Some(&csrf), &fields).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    let id: i64 = posted.location.rsplit('/').next().and_then(|id| id.parse().ok()).expect("the job's page");
    let job = test_app::driver(&pool)
        .job_get(jobs_core::driver::JobGetParams { id })
        .await
        .expect("read")
        .expect("the job");
    assert_eq!(
        (job.queue.as_str(), job.priority, job.max_attempts, job.timeout_ms, job.tags.clone()),
        ("mailers", 5, 3, Some(10_000), vec!["mail".to_owned()])
    );
    let again = post_full(&app, "/admin/jobs/jobs/new", Some(&csrf), &fields).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "{}", again.body);
    assert_eq!(again.location, posted.location, "the first job, found by its uniqueness key");
    assert_eq!(
        again.notice.as_deref(),
        Some(format!("job {id} already exists with this uniqueness key: nothing enqueued").as_str())
    );
}

#[actix_web::test]
async fn every_action_tells_the_audit_hook_who_did_what() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    live_node(&pool).await;
    let ids = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({})); 3]).await;
    fail(&pool, ids[0], "boom").await;
    let events: Arc<Mutex<Vec<(String, AuditEvent)>>> = Arc::default();
    let seen = events.clone();
    let config =
        DashboardConfig::new(pool.clone()).on_action(move |req: &actix_web::HttpRequest, e: &AuditEvent| {
            let who =
                req.headers().get("x-user").and_then(|v| v.to_str().ok()).unwrap_or("nobody").to_owned();
            seen.lock().expect("events").push((who, e.clone()));
        });
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/admin/jobs", config))).await;
    let csrf = token(&app).await;
    let act = |uri: &str, fields: Vec<(&'static str, String)>| {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("csrf", &csrf);
        for (k, v) in &fields {
            form.append_pair(k, v);
        }
        test::TestRequest::post()
            .uri(uri)
            .insert_header(("content-type", "application/x-www-form-urlencoded"))
            .insert_header(("x-user", "alice"))
            .cookie(actix_web::cookie::Cookie::new("jobs_dashboard_csrf", csrf.clone()))
            .set_payload(form.finish())
            .to_request()
    };
    for (uri, fields) in [
        (format!("/admin/jobs/jobs/{}/retry", ids[0]), vec![]),
        (format!("/admin/jobs/jobs/{}/retry", ids[1]), vec![]),
        (
            "/admin/jobs/jobs/bulk".into(),
            vec![("action", "cancel".into()), ("scope", "selected".into()), ("id", ids[2].to_string())],
        ),
        ("/admin/jobs/queues/mailers/pause".into(), vec![]),
        (
            "/admin/jobs/jobs/new".into(),
            vec![("kind", "mail".into()), ("queue", "mailers".into()), ("args", "{}".into())],
        ),
    ] {
        let response = test::call_service(&app, act(&uri, fields)).await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{uri}");
    }
    assert_eq!(state_of(&pool, ids[0]).await, Some(JobState::Available));
    let events = events.lock().expect("events").clone();
    let got: Vec<(&str, &str, i64)> =
        events.iter().map(|(who, e)| (who.as_str(), e.action, e.changed)).collect();
    assert_eq!(
        got,
        [
            ("alice", "job.retry", 1),
            ("alice", "job.retry", 1),
            ("alice", "jobs.cancel", 1),
            ("alice", "queue.pause", 1),
            ("alice", "job.enqueue", 1),
        ]
    );
    assert_eq!(events[0].1.target, format!("job {}", ids[0]));
    assert_eq!(events[3].1.target, "queue mailers");
}

#[actix_web::test]
async fn the_kinds_page_shows_outcomes_failure_rate_and_duration_percentiles() {
    use jobs_core::driver::{KindMetric, KindStatsCount, StatsRecordParams};
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let minute = chrono::Utc::now();
    let row = |kind, metric, idx, count| KindStatsCount { minute, kind, metric, idx, count };
    let rows = [
        row("mail.send", KindMetric::Completed, 0, 1_500),
        row("mail.send", KindMetric::Retried, 0, 500),
        row("mail.send", KindMetric::RunMs, 7, 2_000), // (64, 128] ms
        row("mail.send", KindMetric::WaitMs, 0, 2_000), // at most 1 ms
        row("report.build", KindMetric::Completed, 0, 3),
        row("report.build", KindMetric::RunMs, 16, 3), // (32.8, 65.5] s
        row("report.build", KindMetric::WaitMs, 12, 3), // (2, 4] s
    ];
    let record = StatsRecordParams { counts: &[], kinds: &rows };
    test_app::driver(&pool).stats_record(record).await.expect("record");
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    let (status, body, _) = get(&app, "/admin/jobs/kinds").await;
    assert_eq!(status, StatusCode::OK);
    let line = |kind: &str| {
        let row = body.split(&format!(r#"<tr id="kind-{kind}">"#)).nth(1).expect("the kind's row");
        row.split("</tr>").next().unwrap_or_default().to_owned()
    };
    let mail = line("mail.send");
    assert!(mail.contains(r#"<td class="n">1,500</td><td class="n">500</td>"#), "{mail}");
    assert!(mail.contains(r#"<td class="n">25.0 %</td>"#), "failure rate: {mail}");
    // All in one power-of-two bucket: the percentiles are read within it on a log scale.
    assert!(
        mail.contains(r#"<td class="n">91 ms</td><td class="n">124 ms</td><td class="n">1 ms</td><td class="n">1 ms</td>"#),
        "run p50, p95, wait p50, p95: {mail}"
    );
    let report = line("report.build");
    assert!(
        report.contains(r#"<td class="n">46.3 s</td><td class="n">1 min</td><td class="n">2.9 s</td><td class="n">4.0 s</td>"#),
        "{report}"
    );
    let at = |kind: &str| body.find(&format!(r#"id="kind-{kind}""#)).expect("the kind's row");
    assert!(at("mail.send") < at("report.build"), "busiest first");
    assert_eq!(get(&app, "/admin/jobs/kinds?window=day").await.0, StatusCode::OK);
    assert_eq!(get(&app, "/admin/jobs/kinds?window=year").await.0, StatusCode::BAD_REQUEST);
}
