//! Every dashboard route through actix's test service, against a real Postgres: status,
//! content, and the effect of each action in the database.

mod test_app;

use actix_web::http::StatusCode;
use actix_web::test;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use jobs_core::JobState;
use jobs_core::postgres::schema::jobs_all;
use jobs_core::testing::TestDatabase;
use jobs_dashboard::Access;
use test_app::{app, fail, get, get_with, insert, new_job, post, post_full, state_of, token};

#[actix_web::test]
async fn the_overview_shows_counts_queues_and_the_chart() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({})); 3]).await;
    fail(&pool, ids[0], "smtp down").await;
    // The counters a worker's completer writes about once a second.
    let now = chrono::Utc::now();
    let count = |state, count| jobs_core::driver::StatsCount { minute: now, queue: "mailers", state, count };
    let counts =
        [count(JobState::Completed, 4), count(JobState::Retryable, 2), count(JobState::Discarded, 1)];
    let record = jobs_core::driver::StatsRecordParams { counts: &counts, kinds: &[] };
    test_app::driver(&pool).stats_record(record).await.expect("stats");
    let app = app(&pool, Access::Full).await;

    let (status, body, cookie) = get(&app, "/admin/jobs/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(cookie.is_some(), "the first page sets the CSRF cookie");
    assert!(body.contains("<h1>Overview</h1>"));
    assert!(
        body.contains(r#"<span class="n" title="exact count">2</span><span class="label">available</span>"#),
        "{body}"
    );
    assert!(
        body.contains(r#"<span class="n" title="exact count">1</span><span class="label">discarded</span>"#)
    );
    assert!(body.contains(r#"href="/admin/jobs/jobs?queue=mailers""#));
    assert!(body.contains(r#"<svg class="chart" id="throughput""#));
    assert!(
        body.contains("Last hour: 4 completed, 2 failed attempts retried, 1 discarded or cancelled."),
        "the last hour's counters: {body}"
    );
    // Axes: the y axis tops at a round 10 (7 outcomes in the busiest minute), and a legend.
    assert!(body.contains(r#"text-anchor="end">10</text>"#), "{body}");
    assert!(body.contains(r#"<figcaption class="legend" id="legend">"#));
    // A day and a week, from the same counters; a window that does not exist is a 400.
    for window in ["day", "week"] {
        let (status, body, _) = get(&app, &format!("/admin/jobs/?chart={window}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains(&format!("Last {window}: 4 completed, 2 failed attempts retried")), "{body}");
        assert!(body.contains(&format!(r#"<a href="/admin/jobs/?chart={window}" class="active""#)), "{body}");
    }
    assert_eq!(get(&app, "/admin/jobs/?chart=year").await.0, StatusCode::BAD_REQUEST);
    let (status, _, _) = get(&app, "/admin/jobs").await;
    assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
    let (status, js, _) = get(&app, "/admin/jobs/assets/dashboard.js").await;
    assert_eq!(status, StatusCode::OK);
    assert!(js.contains("live-toggle"));
    let (status, css, _) = get(&app, "/admin/jobs/assets/dashboard.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(css.contains(".badge"));
    let (status, body, _) = get(&app, "/admin/jobs/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("404 Not Found"));
}

#[actix_web::test]
async fn actions_need_the_csrf_token_and_change_the_job() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({})); 3]).await;
    fail(&pool, ids[0], "boom").await;
    let app = app(&pool, Access::Full).await;
    let csrf = token(&app).await;

    let retry = format!("/admin/jobs/jobs/{}/retry", ids[0]);
    let (status, body, _) = post(&app, &retry, None, &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("reload the page"));
    // A forged form: the victim's cookie, but not its token.
    let forged = test::TestRequest::post()
        .uri(&retry)
        .insert_header(("content-type", "application/x-www-form-urlencoded"))
        .cookie(actix_web::cookie::Cookie::new("jobs_dashboard_csrf", csrf.clone()))
        .set_payload(format!("csrf={}", "0".repeat(64)))
        .to_request();
    assert_eq!(test::call_service(&app, forged).await.status(), StatusCode::FORBIDDEN, "mismatch");
    assert_eq!(state_of(&pool, ids[0]).await, Some(JobState::Discarded));

    let posted = post_full(&app, &retry, Some(&csrf), &[]).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER);
    // The notice travels in a cookie, not the URL: shown once, then cleared.
    assert_eq!(posted.location, format!("/admin/jobs/jobs/{}", ids[0]));
    assert_eq!(posted.notice.as_deref(), Some(format!("job {} retried", ids[0]).as_str()));
    let cookie = posted.notice_cookie.expect("a notice cookie");
    let (_, page, cleared) = get_with(&app, &posted.location, cookie).await;
    assert!(
        page.contains(&format!(r#"<p class="notice" id="notice" role="status">job {} retried</p>"#, ids[0]))
    );
    assert!(cleared, "the page clears the notice it showed");
    let (_, reloaded, _) = get(&app, &posted.location).await;
    assert!(!reloaded.contains(r#"id="notice""#), "a reload does not show it again");
    assert_eq!(state_of(&pool, ids[0]).await, Some(JobState::Available));

    let (status, _, _) = post(&app, &format!("/admin/jobs/jobs/{}/cancel", ids[1]), Some(&csrf), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(state_of(&pool, ids[1]).await, Some(JobState::Cancelled));
    let (_, _, location) = post(
        &app,
        &format!("/admin/jobs/jobs/{}/delete", ids[2]),
        Some(&csrf),
        &[("return_to", "https://evil.example/")],
    )
    .await;
    assert_eq!(location, "/admin/jobs/jobs", "no open redirect");
    assert_eq!(state_of(&pool, ids[2]).await, None);
    // Paths browsers read as another host are refused too.
    for sneaky in ["//evil.example/", "/admin/jobs/\\evil", "/admin/jobs/x\nSet-Cookie: a=b"] {
        let (_, _, location) =
            post(&app, "/admin/jobs/queues/mailers/resume", Some(&csrf), &[("return_to", sneaky)]).await;
        assert_eq!(location, "/admin/jobs/queues", "{sneaky}");
    }

    // "Run now" on a scheduled job makes it available at once.
    let later = {
        let mut job = new_job("mail", "mailers", serde_json::json!({}));
        job.delay_ms = Some(3_600_000);
        insert(&pool, vec![job]).await[0]
    };
    assert_eq!(state_of(&pool, later).await, Some(JobState::Scheduled));
    let (_, page, _) = get(&app, &format!("/admin/jobs/jobs/{later}")).await;
    assert!(page.contains(">Run now</button>"));
    post(&app, &format!("/admin/jobs/jobs/{later}/run"), Some(&csrf), &[]).await;
    assert_eq!(state_of(&pool, later).await, Some(JobState::Available));
    assert_eq!(post(&app, "/admin/jobs/jobs/1/explode", Some(&csrf), &[]).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(post(&app, "/admin/jobs/jobs/424242/retry", Some(&csrf), &[]).await.0, StatusCode::NOT_FOUND);
    let (_, page, _) = get(&app, &format!("/admin/jobs/jobs/{}?notice=job+retried", ids[0])).await;
    assert!(!page.contains("job retried"), "a notice in the URL is not shown");
}

#[actix_web::test]
async fn bulk_actions_on_selected_jobs_and_on_a_whole_filter_after_confirmation() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({})); 1_203]).await;
    for id in &ids {
        fail(&pool, *id, "boom").await;
    }
    let app = app(&pool, Access::Full).await;
    let csrf = token(&app).await;

    let (first, second) = (ids[0].to_string(), ids[1].to_string());
    let posted = post_full(
        &app,
        "/admin/jobs/jobs/bulk",
        Some(&csrf),
        &[("action", "retry"), ("scope", "selected"), ("id", &first), ("id", &second)],
    )
    .await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER);
    assert_eq!(posted.notice.as_deref(), Some("2 of 2 selected jobs retried"));
    assert_eq!(state_of(&pool, ids[1]).await, Some(JobState::Available));

    // Deleting a selection asks first, and deletes nothing until confirmed.
    let (third, fourth) = (ids[2].to_string(), ids[3].to_string());
    let delete =
        [("action", "delete"), ("scope", "selected"), ("id", third.as_str()), ("id", fourth.as_str())];
    let (status, body, _) = post(&app, "/admin/jobs/jobs/bulk", Some(&csrf), &delete).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("This will delete <strong>2 selected jobs</strong>"), "{body}");
    assert!(body.contains(&format!(r#"<input type="hidden" name="id" value="{third}">"#)), "{body}");
    assert_eq!(state_of(&pool, ids[2]).await, Some(JobState::Discarded), "not deleted before confirming");
    let mut confirmed_delete = delete.to_vec();
    confirmed_delete.push(("confirmed", "yes"));
    let posted = post_full(&app, "/admin/jobs/jobs/bulk", Some(&csrf), &confirmed_delete).await;
    assert_eq!(posted.notice.as_deref(), Some("2 of 2 selected jobs deleted"));
    assert_eq!(state_of(&pool, ids[2]).await, None);

    // All matching: first a confirmation that states the count, then the action in batches.
    let filter = [("action", "retry"), ("scope", "all"), ("state", "discarded"), ("queue", "mailers")];
    let (status, body, _) = post(&app, "/admin/jobs/jobs/bulk", Some(&csrf), &filter).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("This will retry <strong>1,199 jobs matching the current filter</strong>"),
        "{body}"
    );
    assert_eq!(state_of(&pool, ids[5]).await, Some(JobState::Discarded), "nothing happens before confirming");
    let newest = ids.iter().max().expect("ids").to_string();
    assert!(
        body.contains(&format!(r#"<input type="hidden" name="through" value="{newest}">"#)),
        "pinned: {body}"
    );
    // Jobs that match but arrive after the confirmation are not acted on.
    let late = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({})); 3]).await;
    for id in &late {
        fail(&pool, *id, "boom").await;
    }
    let mut confirmed = filter.to_vec();
    confirmed.extend([("confirmed", "yes"), ("through", newest.as_str())]);
    let posted = post_full(&app, "/admin/jobs/jobs/bulk", Some(&csrf), &confirmed).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER);
    assert_eq!(posted.notice.as_deref(), Some("1,199 matching jobs retried"));
    let mut conn = pool.get().await.expect("conn");
    let discarded: i64 = jobs_all::table
        .filter(jobs_all::state.eq(JobState::Discarded))
        .count()
        .get_result(&mut conn)
        .await
        .expect("count");
    assert_eq!(discarded, 3, "only the three that arrived after the confirmation");

    let (status, _, _) =
        post(&app, "/admin/jobs/jobs/bulk", Some(&csrf), &[("action", "retry"), ("scope", "selected")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "nothing selected");
}

#[actix_web::test]
async fn read_only_hides_and_refuses_actions_and_denied_sees_nothing() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({}))]).await;
    fail(&pool, ids[0], "boom").await;

    let read_only = app(&pool, Access::ReadOnly).await;
    let csrf = token(&read_only).await;
    let (status, body, _) = get(&read_only, &format!("/admin/jobs/jobs/{}", ids[0])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"id="read-only""#));
    assert!(!body.contains(r#"id="retry""#), "no action buttons");
    let (_, list, _) = get(&read_only, "/admin/jobs/jobs").await;
    assert!(!list.contains("bulk-bar"));
    let (status, body, _) =
        post(&read_only, &format!("/admin/jobs/jobs/{}/retry", ids[0]), Some(&csrf), &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("read-only"));
    assert_eq!(state_of(&pool, ids[0]).await, Some(JobState::Discarded));

    let denied = app(&pool, Access::Denied).await;
    let (status, body, _) = get(&denied, "/admin/jobs/").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!body.contains("mailers"));
}

#[actix_web::test]
async fn queues_pause_and_resume_and_cron_schedules_are_managed() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({}))]).await;
    let mut conn = pool.get().await.expect("conn");
    let def = jobs_core::driver::ScheduleDef {
        name: "nightly-report".into(),
        expression: "0 0 3 * * *".into(),
        timezone: "Europe/Paris".into(),
        kind: "report".into(),
        args: "null".into(),
        options: serde_json::json!({"queue": "reports"}),
        missed_policy: "skip".into(),
    };
    test_app::declare(&pool, &[def]).await;
    let app = app(&pool, Access::Full).await;
    let csrf = token(&app).await;

    let (_, body, _) = get(&app, "/admin/jobs/queues").await;
    assert!(body.contains(r#"<tr id="queue-mailers">"#) && body.contains(">Pause</button>"));
    let (status, _, _) = post(&app, "/admin/jobs/queues/mailers/pause", Some(&csrf), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(test_app::is_paused(&pool, "mailers").await);
    let (_, body, _) = get(&app, "/admin/jobs/queues").await;
    assert!(body.contains(r#"<span class="badge queue-paused">paused</span>"#), "{body}");
    post(&app, "/admin/jobs/queues/mailers/resume", Some(&csrf), &[]).await;
    assert!(!test_app::is_paused(&pool, "mailers").await);

    let (_, body, _) = get(&app, "/admin/jobs/cron").await;
    assert!(body.contains("nightly-report") && body.contains("<code>0 0 3 * * *</code> Europe/Paris"));
    post(&app, "/admin/jobs/cron/nightly-report/disable", Some(&csrf), &[]).await;
    let row = test_app::schedule(&pool, "nightly-report").await.expect("row");
    assert!(!row.enabled);
    let (_, body, _) = get(&app, "/admin/jobs/cron").await;
    assert!(body.contains(">disabled<") && body.contains(">Enable</button>"));
    assert!(
        body.contains(r#"<td class="next-runs"><span class="muted">none: disabled</span></td>"#),
        "{body}"
    );
    post(&app, "/admin/jobs/cron/nightly-report/enable", Some(&csrf), &[]).await;
    let row = test_app::schedule(&pool, "nightly-report").await.expect("row");
    assert!(row.enabled);
    assert_eq!(
        post(&app, "/admin/jobs/cron/nightly-report/explode", Some(&csrf), &[]).await.0,
        StatusCode::BAD_REQUEST
    );
    let (_, body, _) = get(&app, "/admin/jobs/cron").await;
    assert_eq!(
        body.matches("<time datetime=").count(),
        3,
        "an enabled schedule lists its next 3 runs: {body}"
    );
    let posted = post_full(&app, "/admin/jobs/cron/nightly-report/run", Some(&csrf), &[]).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER);
    assert!(posted.notice.as_deref().is_some_and(|n| n.contains("enqueued job")), "{:?}", posted.notice);
    let queued: i64 =
        jobs_all::table.filter(jobs_all::queue.eq("reports")).count().get_result(&mut conn).await.expect("n");
    assert_eq!(queued, 1);
    // "Run now" is recorded: the schedule's last run is that job, marked as run now.
    let row = test_app::schedule(&pool, "nightly-report").await.expect("row");
    let job_id = row.last_job_id.expect("the run is recorded");
    assert!(row.last_run_at.is_some());
    let (_, body, _) = get(&app, "/admin/jobs/cron").await;
    assert!(body.contains(&format!(r#"<a href="/admin/jobs/jobs/{job_id}">job {job_id}</a>"#)), "{body}");
    assert!(body.contains(r#"<span class="badge run-now">run now</span>"#), "{body}");
    assert_eq!(post(&app, "/admin/jobs/cron/missing/run", Some(&csrf), &[]).await.0, StatusCode::NOT_FOUND);
}
