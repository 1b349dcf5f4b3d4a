//! The queues page's settings for the whole cluster: the concurrency per node and the
//! limits (global, per key, rate), set, shown and refused when absurd; and how much of the
//! limits is in use: running against each limit, the rate's starts, the busiest keys, and
//! why each queue's jobs wait.

mod test_app;

use actix_web::http::StatusCode;
use jobs_core::driver::{
    JobClaimParams, QueueSetLimitsParams, QueueSettings, QueueSettingsParams, RateLimit,
};
use jobs_core::testing::TestDatabase;
use test_app::{get, insert, new_job, post_full, token};

/// A live node serving `mailers`, where a job waits.
async fn serving_mailers(pool: &jobs_core::postgres::Pool) {
    let queues = serde_json::json!({"mailers": {"limit": 5, "running": 0}});
    test_app::live_node(pool, queues, &["mail"], serde_json::json!({})).await;
    insert(pool, vec![new_job("mail", "mailers", serde_json::json!({}))]).await;
}

/// `mailers`' stored settings.
async fn mailers(pool: &jobs_core::postgres::Pool) -> Option<QueueSettings> {
    let all = test_app::driver(pool).queue_settings(QueueSettingsParams { queue: Some("mailers") }).await;
    all.expect("settings").into_iter().next()
}

#[actix_web::test]
async fn a_queues_concurrency_is_set_for_every_node_and_cleared() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    serving_mailers(&pool).await;
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    let csrf = token(&app).await;
    let stored = || async { mailers(&pool).await.and_then(|s| s.concurrency) };
    let uri = "/admin/jobs/queues/mailers/concurrency";
    let posted = post_full(&app, uri, Some(&csrf), &[("concurrency", "3")]).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert_eq!(stored().await, Some(3));
    assert!(
        posted.notice.as_deref().is_some_and(|n| n.contains("3 at a time on every node")),
        "{:?}",
        posted.notice
    );
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("<strong>3</strong> on every node"), "{page}");
    for bad in ["0", "100001", "two"] {
        let posted = post_full(&app, uri, Some(&csrf), &[("concurrency", bad)]).await;
        assert_eq!(posted.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(posted.body.contains("concurrency"), "{bad}: {}", posted.body);
    }
    assert_eq!(stored().await, Some(3), "a bad value changes nothing");
    post_full(&app, uri, Some(&csrf), &[("concurrency", "")]).await;
    assert_eq!(stored().await, None, "empty: each node's own again");
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("each node's own"), "{page}");
}

#[actix_web::test]
async fn a_queues_limits_are_set_for_the_cluster_and_cleared() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    serving_mailers(&pool).await;
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    let csrf = token(&app).await;
    let stored = || async { mailers(&pool).await.map(|s| (s.global_limit, s.rate())) };
    let uri = "/admin/jobs/queues/mailers/limits";
    let both = [("global_limit", "4"), ("rate_allowed", "60"), ("rate_period", "60")];
    let posted = post_full(&app, uri, Some(&csrf), &both).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert_eq!(stored().await, Some((Some(4), Some(RateLimit { allowed: 60, period_secs: 60 }))));
    assert!(
        posted
            .notice
            .as_deref()
            .is_some_and(|n| n.contains("at most 4 running across the cluster, 60 per minute")),
        "{:?}",
        posted.notice
    );
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("at most <strong>4</strong> running"), "{page}");
    assert!(page.contains("<strong>60 per minute</strong> started"), "{page}");
    assert!(page.contains(r#"<option value="60" selected>per minute</option>"#), "{page}");

    let bad: [&[(&str, &str)]; 6] = [
        &[("global_limit", "0")],
        &[("global_limit", "100001")],
        &[("global_limit", "four")],
        &[("rate_allowed", "0"), ("rate_period", "60")],
        &[("rate_allowed", "10")],
        &[("rate_allowed", "10"), ("rate_period", "604800")],
    ];
    for fields in bad {
        let posted = post_full(&app, uri, Some(&csrf), fields).await;
        assert_eq!(posted.status, StatusCode::BAD_REQUEST, "{fields:?}");
        assert!(posted.body.contains("limit") || posted.body.contains("rate"), "{fields:?}: {}", posted.body);
    }
    assert_eq!(
        stored().await,
        Some((Some(4), Some(RateLimit { allowed: 60, period_secs: 60 }))),
        "a bad value changes nothing"
    );

    // Only a rate: the global limit goes; then nothing: both go.
    let posted = post_full(
        &app,
        uri,
        Some(&csrf),
        &[("global_limit", ""), ("rate_allowed", "5"), ("rate_period", "1")],
    )
    .await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert_eq!(stored().await, Some((None, Some(RateLimit { allowed: 5, period_secs: 1 }))));
    let posted = post_full(
        &app,
        uri,
        Some(&csrf),
        &[("global_limit", ""), ("rate_allowed", ""), ("rate_period", "60")],
    )
    .await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert!(posted.notice.as_deref().is_some_and(|n| n.contains("no limits")), "{:?}", posted.notice);
    assert_eq!(stored().await, Some((None, None)));
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("no global limit") && page.contains("no rate limit"), "{page}");
    assert!(page.contains("no rate per key"), "{page}");

    // A rate per key, from its own two fields; one without its period is refused.
    let per_key = [("per_key_rate_allowed", "10"), ("per_key_rate_period", "3600")];
    let posted = post_full(&app, uri, Some(&csrf), &per_key).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert!(
        posted.notice.as_deref().is_some_and(|n| n.contains("10 per hour started per key")),
        "{:?}",
        posted.notice
    );
    let key_rate = mailers(&pool).await.and_then(|s| s.per_key_rate());
    assert_eq!(key_rate, Some(RateLimit { allowed: 10, period_secs: 3600 }));
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("<strong>10 per hour</strong> started per key"), "{page}");
    assert!(page.contains(r#"name="per_key_rate_allowed" min="1""#), "{page}");
    let posted = post_full(&app, uri, Some(&csrf), &[("per_key_rate_allowed", "10")]).await;
    assert_eq!(posted.status, StatusCode::BAD_REQUEST);
    assert!(posted.body.contains("the rate per key needs its period"), "{}", posted.body);
    let posted = post_full(&app, uri, Some(&csrf), &[("per_key_rate_allowed", "")]).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert_eq!(mailers(&pool).await.and_then(|s| s.per_key_rate()), None);
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(
        page.contains(r#"<option value="60" selected>per minute</option>"#),
        "a minute by default: {page}"
    );

    // A per-key limit, shown and refused when absurd.
    let per_key = || async { mailers(&pool).await.and_then(|s| s.per_key_limit) };
    let posted = post_full(&app, uri, Some(&csrf), &[("per_key_limit", "2"), ("rate_period", "60")]).await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert!(
        posted.notice.as_deref().is_some_and(|n| n.contains("at most 2 running per key")),
        "{:?}",
        posted.notice
    );
    assert_eq!(per_key().await, Some(2));
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("at most <strong>2</strong> per key"), "{page}");
    assert!(page.contains(r#"name="per_key_limit" min="1""#) && page.contains(r#"value="2""#), "{page}");
    for bad in ["0", "100001", "two"] {
        let posted = post_full(&app, uri, Some(&csrf), &[("per_key_limit", bad)]).await;
        assert_eq!(posted.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    assert_eq!(per_key().await, Some(2), "a bad value changes nothing");
}

/// A job of `customer` on `mailers`, keyed by the customer.
fn keyed(customer: Option<&str>) -> jobs_core::NewJob {
    let mut job = new_job("mail", "mailers", serde_json::json!({ "to": customer }));
    if let Some(c) = customer {
        job.meta = serde_json::json!({ "_partition_key": c }).to_string().into();
    }
    job
}

#[actix_web::test]
async fn the_queues_page_shows_the_limits_in_use_the_busiest_keys_and_why_jobs_wait() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let queues = serde_json::json!({"mailers": {"limit": 5, "running": 0}});
    test_app::live_node(&pool, queues, &["mail"], serde_json::json!({})).await;
    let driver = test_app::driver(&pool);
    // acme: 5 jobs, globex: 2, one unkeyed; at most 2 per key, 4 in all, 5 a minute.
    let mut jobs: Vec<_> = (0..5).map(|_| keyed(Some("acme"))).collect();
    jobs.extend([keyed(Some("globex")), keyed(Some("globex")), keyed(None)]);
    insert(&pool, jobs).await;
    let limits = |global_limit, allowed| QueueSetLimitsParams {
        queue: "mailers",
        global_limit,
        per_key_limit: Some(2),
        rate: Some(RateLimit { allowed, period_secs: 60 }),
        per_key_rate: None,
    };
    driver.queue_set_limits(limits(Some(4), 5)).await.expect("set");
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("Limits in use") && page.contains("0 of 4 running"), "{page}");
    assert!(page.contains("0 of 5 started in the last minute") && page.contains("none running"), "{page}");

    // A claim takes 4 (the global limit), one per key per round from the unkeyed group
    // on: the unkeyed job, acme, globex, then acme again.
    let claim = JobClaimParams {
        queue: "mailers",
        limit: 10,
        node: "node-a",
        now: None,
        recurring_size: false,
        limited: true,
        declared: Default::default(),
        ended: &[],
    };
    let claimed = driver.job_claim(claim).await.expect("claim");
    assert_eq!(claimed.len(), 4, "{claimed:?}");
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("4 of 4 running") && page.contains("4 of 5 started in the last minute"), "{page}");
    assert!(page.contains("3 keys running, 1 at their limit of 2"), "{page}");
    assert!(page.contains("<code>acme</code> 2 running (at the limit), 3 waiting"), "{page}");
    assert!(page.contains("<code>(no key)</code> 1 running</div>"), "{page}");
    assert!(page.contains("<code>globex</code> 1 running, 1 waiting"), "{page}");
    assert!(page.contains("at its global limit (4): 4 available wait for a running job to end"), "{page}");
    assert!(
        page.contains("1 key at the per-key limit (2) starts no more until one of its jobs ends"),
        "{page}"
    );
    assert!(!page.contains("rate used up"), "{page}");

    // No global limit, 4 a minute: the rate is used up.
    driver.queue_set_limits(limits(None, 4)).await.expect("set");
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("4 running") && page.contains("4 of 4 started in the last minute"), "{page}");
    assert!(page.contains("rate used up: 4 available wait for starts to leave the last period"), "{page}");
    assert!(!page.contains("at its global limit"), "{page}");
    assert!(!page.contains("rate per key ("), "{page}");

    // Only a rate per key, 1 an hour: acme and globex start one each, then wait.
    let per_key_rate = QueueSetLimitsParams {
        queue: "mailers",
        global_limit: None,
        per_key_limit: None,
        rate: None,
        per_key_rate: Some(RateLimit { allowed: 1, period_secs: 3600 }),
    };
    driver.queue_set_limits(per_key_rate).await.expect("set");
    let claimed = driver.job_claim(claim).await.expect("claim");
    assert_eq!(claimed.len(), 2, "{claimed:?}");
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("<strong>1 per hour</strong> started per key"), "{page}");
    assert!(page.contains(r#"<div class="limits-key-rate">2 keys used up their 1 per hour</div>"#), "{page}");
    assert!(
        page.contains(
            "rate per key (1 per hour) used up by 2 keys: their jobs start again as starts leave the last hour"
        ),
        "{page}"
    );

    // Paused: that is why, whatever the limits say.
    driver
        .queue_set_paused(jobs_core::driver::QueueSetPausedParams { queue: "mailers", paused: true })
        .await
        .expect("pause");
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(page.contains("paused: 2 available wait for a resume"), "{page}");
    assert!(!page.contains("rate used up"), "{page}");
}

#[actix_web::test]
async fn limits_the_workers_declare_show_where_none_is_stored() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let declared =
        serde_json::json!({"per_key_limit": 1, "per_key_rate_allowed": 30, "per_key_rate_period_secs": 60});
    let queues = serde_json::json!({"mailers": {"limit": 5, "running": 0, "declared": declared}});
    test_app::live_node(&pool, queues, &["mail"], serde_json::json!({})).await;
    insert(&pool, vec![keyed(Some("acme")), keyed(Some("acme"))]).await;
    let app = test_app::app(&pool, jobs_dashboard::Access::Full).await;
    let (_, page, _) = get(&app, "/admin/jobs/queues").await;
    assert!(
        page.contains(r#"<tr id="limits-mailers"><td>mailers<div class="hint">limits declared by its workers</div></td><td class="limits-running">0 running</td>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<div class="limits-key-rate">0 keys used up their 30 per minute</div>"#),
        "{page}"
    );
    // Nothing stored: the settings' cell says so, the form stays empty.
    assert!(page.contains("no per-key limit") && page.contains("no rate per key"), "{page}");
}
