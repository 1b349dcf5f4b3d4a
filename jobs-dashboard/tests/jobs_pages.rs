//! The jobs list and a job's page: filters, search (windowed where no index serves it,
//! by id, by error text), keyset pages and sorting, the job's facts, errors and ordered
//! timeline, and the page on a driver that cannot search arguments.

mod test_app;

use actix_web::http::StatusCode;
use jobs_core::JobState;
use jobs_core::NewJob;
use jobs_core::testing::TestDatabase;
use jobs_dashboard::Access;
use test_app::{app, fail, get, insert, new_job};

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
    assert!(body.contains(r#"<dd id="timeout">none</dd>"#), "the timeout is shown: {body}");
    assert!(body.contains("at shop::charge (src/lib.rs:62)"), "backtrace");
    assert!(
        body.contains("<strong>attempt 1 failed after 1.0 s</strong> panic: payment gateway crashed</li>"),
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
    use jobs_core::postgres::schema::jobs;
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
            "attempt 1 snoozed after 1.0 s",
            "due again",
            "attempt 1 started",
            "attempt 1 failed after 2.5 s",
            "due again"
        ],
        "{timeline}"
    );
    assert!(timeline.contains("snoozed for 60s; the attempt is not counted"), "{timeline}");
    assert!(timeline.contains("on node-b"), "{timeline}");
    assert!(timeline.contains("timeout: the attempt exceeded its 2.5s timeout</li>"), "{timeline}");
    // Each line says how long after the one before it came: the backoff reads at a glance.
    let gaps: Vec<&str> = timeline
        .split(r#"<span class="gap muted">"#)
        .skip(1)
        .map(|s| s.split("</span>").next().unwrap_or_default())
        .collect();
    assert_eq!(gaps.len(), 6, "{timeline}");
    assert_eq!(gaps[..5], ["+1.0 s", "+1.0 s", "+1 min", "+1.0 s", "+2.5 s"], "{timeline}");
    assert!(
        timeline.contains(r#"<span class="badge">upcoming</span>"#),
        "the retry is still due: {timeline}"
    );
    assert!(
        timeline.contains(
            r#"<time class="exact" datetime="2026-11-22T10:00:00.000Z" title="2026-11-22 10:00:00.000 UTC">"#
        ),
        "exact times, which the page's script leaves as they are: {timeline}"
    );
    // The facts say when it is scheduled for.
    assert!(body.contains(r#"<dd id="scheduled-at"><time datetime="2036-11-22T10:05:00.000Z""#), "{body}");
    // Each node once, with how many times it claimed the job.
    assert!(body.contains(r#"<dd id="nodes">node-a, node-b</dd>"#), "{body}");
    // The snooze is not listed among the errors.
    assert_eq!(body.matches(r#"<article class="error">"#).count(), 1, "{body}");
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

/// A job that failed and then succeeded shows its earlier error as history (muted,
/// "recovered from"), not as a failure; a discarded job's stays an error.
#[actix_web::test]
async fn a_recovered_jobs_old_error_reads_as_history() {
    use diesel::prelude::*;
    use diesel_async::RunQueryDsl;
    use jobs_core::postgres::schema::jobs;
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(2).expect("pool");
    let ids = insert(
        &pool,
        vec![
            new_job("charge", "billing", serde_json::json!({"n": 1})),
            new_job("charge", "billing", serde_json::json!({"n": 2})),
        ],
    )
    .await;
    fail(&pool, ids[0], "gateway timed out").await;
    fail(&pool, ids[1], "card declined").await;
    let mut conn = pool.get().await.expect("conn");
    diesel::update(jobs::table.find(ids[0]))
        .set(jobs::state.eq(JobState::Completed))
        .execute(&mut conn)
        .await
        .expect("recovered");
    let app = app(&pool, Access::Full).await;
    let (_, body, _) = get(&app, "/admin/jobs/jobs").await;
    assert!(
        body.contains(r#"<td class="error-text recovered">recovered from: gateway timed out</td>"#),
        "{body}"
    );
    assert!(body.contains(r#"<td class="error-text">card declined</td>"#), "{body}");
}
