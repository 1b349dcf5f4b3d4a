//! Every dashboard route through actix's test service, against a real Postgres: status,
//! content, and the effect of each action in the database.

mod test_app;

use actix_web::http::StatusCode;
use actix_web::test;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use jobs_core::JobState;
use jobs_core::NewJob;
use jobs_core::schema::jobs;
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
async fn the_jobs_list_filters_searches_and_pages_by_keyset() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let mut batch: Vec<NewJob> =
        (0..120).map(|i| new_job("mail", "mailers", serde_json::json!({"user_id": i}))).collect();
    batch.push(new_job("charge", "billing", serde_json::json!({"order_id": 9})));
    let ids = insert(&pool, batch).await;
    fail(&pool, ids[120], "card declined").await;
    let app = app(&pool, Access::Full).await;

    let (status, body, _) = get(&app, "/admin/jobs/jobs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"<small id="job-count" data-live title="exact count">121</small>"#));
    assert_eq!(body.matches(r#"class="job-link""#).count(), 50);
    assert!(body.contains(&format!(">{}</a>", ids[120])), "newest first");
    let older = format!("before={}", ids[71]);
    assert!(body.contains(&older), "the older link continues after the last row shown");

    // The id column sorts: oldest first, pages continuing upwards.
    assert!(body.contains(r#"<a href="/admin/jobs/jobs?sort=oldest" id="sort-id""#), "{body}");
    let (_, oldest, _) = get(&app, "/admin/jobs/jobs?sort=oldest").await;
    let first_link = |page: &str| {
        page.split(r#"class="job-link">"#).nth(1).and_then(|t| t.split('<').next()).map(str::to_owned)
    };
    assert_eq!(first_link(&oldest), Some(ids[0].to_string()));
    assert!(
        oldest.contains(&format!("sort=oldest&amp;before={}\" id=\"older\">newer »", ids[49])),
        "{oldest}"
    );
    assert!(oldest.contains(r#"<a href="/admin/jobs/jobs?" id="sort-id""#), "the link back to newest first");
    assert_eq!(get(&app, "/admin/jobs/jobs?sort=kind").await.0, StatusCode::BAD_REQUEST);
    // Time orders where an index serves them, and only there.
    let (_, finished, _) = get(&app, "/admin/jobs/jobs?state=discarded").await;
    assert!(
        finished.contains(
            r#"<a href="/admin/jobs/jobs?state=discarded&#38;sort=finished" >recently finished</a>"#
        ),
        "{finished}"
    );
    assert!(!finished.contains("due soonest"));
    assert_eq!(get(&app, "/admin/jobs/jobs?state=discarded&sort=finished").await.0, StatusCode::OK);
    let (status, body, _) = get(&app, "/admin/jobs/jobs?sort=due").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("sorting by due time needs the scheduled or retryable state"), "{body}");
    assert_eq!(get(&app, "/admin/jobs/jobs?state=scheduled&sort=due").await.0, StatusCode::OK);

    let (_, page2, _) = get(&app, &format!("/admin/jobs/jobs?{older}")).await;
    assert_eq!(page2.matches(r#"class="job-link""#).count(), 50);
    assert!(page2.contains(&format!(">{}</a>", ids[70])) && !page2.contains(&format!(">{}</a>", ids[71])));

    let (_, failed, _) = get(&app, "/admin/jobs/jobs?state=discarded").await;
    assert_eq!(failed.matches(r#"class="job-link""#).count(), 1);
    assert!(failed.contains("card declined"));

    let (_, found, _) = get(&app, "/admin/jobs/jobs?state=available&q=user_id%3D7").await;
    assert_eq!(found.matches(r#"class="job-link""#).count(), 1);
    assert!(found.contains(&format!(">{}</a>", ids[7])));
    // Without a state, a search covers every state: no index serves that, so it reads the
    // newest jobs a window of ids at a time, says how far it read, and live refresh is off.
    let (_, failed_search, _) = get(&app, "/admin/jobs/jobs?q=order_id%3D9").await;
    assert_eq!(failed_search.matches(r#"class="job-link""#).count(), 1);
    let (_, anywhere, _) = get(&app, "/admin/jobs/jobs?q=user_id%3D7").await;
    assert_eq!(anywhere.matches(r#"class="job-link""#).count(), 1, "an available job is found too");
    assert!(anywhere.contains(&format!("Searched jobs 1 to {}, newest first", ids[120])), "{anywhere}");
    assert!(anywhere.contains("That is every job."), "{anywhere}");
    assert!(anywhere.contains(r#"data-live-off="off while searching""#));
    assert!(!anywhere.contains(r#"id="bulk-all""#), "no bulk action on a whole scan");
    // Other text is looked for in the errors.
    let (_, by_error, _) = get(&app, "/admin/jobs/jobs?q=CARD+DECL").await;
    assert_eq!(by_error.matches(r#"class="job-link""#).count(), 1, "{by_error}");
    assert!(by_error.contains(&format!(">{}</a>", ids[120])));
    let (_, nothing, _) = get(&app, "/admin/jobs/jobs?q=100%25+off").await;
    assert!(nothing.contains("No jobs match."), "% is a character, not a wildcard");
    let (_, by_meta, _) =
        get(&app, "/admin/jobs/jobs?q=%7B%22request_id%22%3A%22req-1%22%7D&queue=billing").await;
    assert_eq!(by_meta.matches(r#"class="job-link""#).count(), 1);
    let (_, tagged, _) = get(&app, "/admin/jobs/jobs?tag=signup&kind=charge").await;
    assert_eq!(tagged.matches(r#"class="job-link""#).count(), 1);
    let (_, none, _) = get(&app, "/admin/jobs/jobs?from=2099-01-01").await;
    assert!(none.contains("No jobs match."));

    for bad in ["state=exploded", "from=yesterday", "q=%7Bnot-json", "before=abc"] {
        let (status, body, _) = get(&app, &format!("/admin/jobs/jobs?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(body.contains("400 Bad Request"), "{bad}: {body}");
    }
}

#[actix_web::test]
async fn a_job_page_shows_args_errors_backtrace_and_timeline() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(
        &pool,
        vec![new_job("charge", "billing", serde_json::json!({"order_id": 7, "note": "<script>"}))],
    )
    .await;
    fail(&pool, ids[0], "payment gateway crashed").await;
    let app = app(&pool, Access::Full).await;

    let (status, body, _) = get(&app, &format!("/admin/jobs/jobs/{}", ids[0])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains(r#"<span class="badge state-discarded" id="job-state" data-live>discarded</span>"#)
    );
    assert!(body.contains("&#34;order_id&#34;: 7"), "args shown, escaped: {body}");
    assert!(body.contains("&#60;script&#62;") && !body.contains("<script>&#34;"), "escaped");
    assert!(body.contains("payment gateway crashed"));
    assert!(body.contains("at shop::charge (src/lib.rs:62)"), "backtrace");
    assert!(
        body.contains("<strong>attempt 1 failed</strong> panic: payment gateway crashed after 1.0 s"),
        "{body}"
    );
    assert!(body.contains(r#"id="retry""#) && body.contains(r#"id="delete""#));

    // 404 and 400 are pages of the dashboard: its navigation, what went wrong, a way back.
    for (uri, status, says) in [
        ("/admin/jobs/jobs/999999", StatusCode::NOT_FOUND, "job 999999 not found"),
        ("/admin/jobs/jobs/seven", StatusCode::BAD_REQUEST, "`seven` is not a job id"),
        ("/admin/jobs/nowhere", StatusCode::NOT_FOUND, "page /admin/jobs/nowhere not found"),
        ("/admin/jobs/jobs?state=exploded", StatusCode::BAD_REQUEST, "unknown state `exploded`"),
    ] {
        let (got, body, _) = get(&app, uri).await;
        assert_eq!(got, status, "{uri}");
        assert!(body.contains(r#"<a href="/admin/jobs/jobs" >Jobs</a>"#), "the navigation: {body}");
        assert!(body.contains(r#"id="error-page""#) && body.contains(says), "{uri}: {body}");
        assert!(body.contains(r#"href="/admin/jobs/" data-back>Go back</a>"#), "{body}");
    }
}

/// The timeline is in time order and shows every attempt with its node and duration,
/// snoozes, failures, when the retry is due, and the upcoming run.
#[actix_web::test]
async fn a_job_timeline_is_ordered_with_snoozes_failures_and_the_retry_due() {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use jobs_core::schema::jobs;
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![new_job("sync", "feeds", serde_json::json!({}))]).await;
    // Created at 10:00; attempt 1 snoozed for 60 s on node-a; attempt 1 again failed on
    // node-b, retry due at 10:05 (in the future relative to the failure, not the page).
    let errors = serde_json::json!([
        {"attempt": 1, "attempted_at": "2026-11-22T10:00:01Z", "at": "2026-11-22T10:00:02Z", "node": "node-a",
         "error_type": "snoozed", "message": "snoozed for 60s", "retry_at": "2026-11-22T10:01:02Z"},
        {"attempt": 1, "attempted_at": "2026-11-22T10:01:03Z", "at": "2026-11-22T10:01:05.5Z", "node": "node-b",
         "error_type": "timeout", "message": "the attempt exceeded its 2.5s timeout", "retry_at": "2036-11-22T10:05:00Z"}
    ]);
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&chrono::Utc);
    let mut conn = pool.get().await.expect("conn");
    diesel::update(jobs::table.find(ids[0]))
        .set((
            jobs::state.eq(JobState::Retryable),
            jobs::attempt.eq(1),
            jobs::created_at.eq(at("2026-11-22T10:00:00Z")),
            jobs::attempted_at.eq(Some(at("2026-11-22T10:01:03Z"))),
            jobs::scheduled_at.eq(at("2036-11-22T10:05:00Z")),
            jobs::attempted_by.eq(vec!["node-a".to_owned(), "node-b".to_owned()]),
            jobs::errors.eq(errors),
        ))
        .execute(&mut conn)
        .await
        .expect("history");
    let app = app(&pool, Access::Full).await;
    let (_, body, _) = get(&app, &format!("/admin/jobs/jobs/{}", ids[0])).await;
    let timeline = body
        .split(r#"id="timeline" data-live>"#)
        .nth(1)
        .and_then(|t| t.split("</ol>").next())
        .expect("timeline");
    let steps: Vec<&str> =
        timeline.split("<strong>").skip(1).map(|s| s.split("</strong>").next().unwrap_or_default()).collect();
    assert_eq!(
        steps,
        [
            "created",
            "attempt 1 started",
            "attempt 1 snoozed",
            "due again",
            "attempt 1 started",
            "attempt 1 failed",
            "due again"
        ],
        "{timeline}"
    );
    assert!(timeline.contains("snoozed for 60s after 1.0 s; the attempt is not counted"), "{timeline}");
    assert!(timeline.contains("on node-b"), "{timeline}");
    assert!(timeline.contains("timeout: the attempt exceeded its 2.5s timeout after 2.5 s"), "{timeline}");
    assert!(
        timeline.contains(r#"<span class="badge">upcoming</span>"#),
        "the retry is still due: {timeline}"
    );
    assert!(
        timeline
            .contains(r#"<time datetime="2026-11-22T10:00:00.000Z" title="2026-11-22 10:00:00.000 UTC">"#)
    );
    // The facts say when it is scheduled for.
    assert!(body.contains(r#"<dd id="scheduled-at"><time datetime="2036-11-22T10:05:00.000Z""#), "{body}");
    // The snooze is not listed among the errors.
    assert_eq!(body.matches(r#"<article class="error">"#).count(), 1, "{body}");
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
    let discarded: i64 = jobs::table
        .filter(jobs::state.eq(JobState::Discarded))
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
        jobs::table.filter(jobs::queue.eq("reports")).count().get_result(&mut conn).await.expect("n");
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

/// On a driver without JSON containment the jobs page has no search box, and a search
/// parameter is a 400 naming what is missing; the same page on the full driver has both.
#[actix_web::test]
async fn a_driver_without_search_gets_a_jobs_page_without_it() {
    use jobs_core::PgDriver;
    use jobs_core::driver::Capability;
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![new_job("mail", "mailers", serde_json::json!({"user_id": 7})); 2]).await;
    let full = app(&pool, Access::Full).await;
    let (status, body, _) = get(&full, "/admin/jobs/jobs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"name="q""#), "the full driver offers search");
    let (status, _, _) = get(&full, "/admin/jobs/jobs?q=user_id%3D7&state=available").await;
    assert_eq!(status, StatusCode::OK);

    let driver = PgDriver::new(pool.clone()).without(Capability::JsonContainment);
    let plain = test_app::app_on(driver, Access::Full).await;
    let (status, body, _) = get(&plain, "/admin/jobs/jobs").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#"placeholder='job id'"#), "only a search by id without JSON containment");
    assert_eq!(body.matches(r#"class="job-link""#).count(), 2, "the rest of the page is there");
    // A job id in the search box opens that job, on every driver; digits that are no job's
    // id are looked for in the errors instead.
    let uri = format!("/admin/jobs/jobs?q=%23{}", ids[1]);
    let response =
        actix_web::test::call_service(&plain, actix_web::test::TestRequest::get().uri(&uri).to_request())
            .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let location = format!("/admin/jobs/jobs/{}", ids[1]);
    assert_eq!(response.headers().get("location").and_then(|l| l.to_str().ok()), Some(location.as_str()));
    let (status, body, _) = get(&plain, "/admin/jobs/jobs?q=404040404").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("No jobs match.") && body.contains(r#"id="searched""#), "{body}");
    let (status, body, _) = get(&plain, "/admin/jobs/jobs?q=user_id%3D7").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("JSON containment"), "{body}");
}
