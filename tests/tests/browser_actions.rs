//! Every dashboard action in a real headless Chromium, once at a phone's width in dark mode
//! and once at a desktop's in light mode: cancel, retry and delete a job; act on a
//! selection and on everything matching a filter (after its confirmation); pause and
//! resume a queue and set its concurrency and limits for the cluster; disable, enable and
//! run a cron schedule; enqueue a job from the form; switch the theme and live refresh.
//! Each step checks what the page says and what the database holds, and saves a
//! screenshot under `target/browser-screenshots/actions/`.

use fantoccini::{Client, Locator};
use jobs_core::driver::{
    Driver, JobGetParams, NodeHeartbeatParams, QueueSettingsParams, ScheduleDef, ScheduleGetParams,
    ScheduleSyncParams,
};
use jobs_core::testing::TestDatabase;
use jobs_core::{IntoDriver, JobState};
use jobs_tests::browser::{DEADLINE, browser, click, screenshot, serve_dashboard, start_driver, text};
use jobs_tests::conformance::factory::{JobFactory, insert_all};
use jobs_tests::wait_for;

/// Waits until the page's notice satisfies `ok` (after a click the old page may still be
/// showing), and returns it.
async fn notice(client: &Client, what: &str, ok: impl Fn(&str) -> bool) -> String {
    wait_for(&format!("the notice {what}"), DEADLINE, || async {
        let shown = client.find(Locator::Css("#notice")).await.ok()?.text().await.ok()?;
        ok(&shown).then_some(shown)
    })
    .await
}

async fn state(driver: &std::sync::Arc<dyn Driver>, id: i64) -> Option<JobState> {
    driver.job_get(JobGetParams { id }).await.expect("read").map(|j| j.state)
}

async fn eval(client: &Client, script: &str) -> serde_json::Value {
    client.execute(script, vec![]).await.unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// One pass over every action, on its own database, with the window and theme given.
async fn walk(chromedriver: &jobs_tests::browser::Driver, size: (u32, u32), theme: &str, name: &str) {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let driver = (&pool).into_driver();
    let now = chrono::Utc::now();
    let ids = insert_all(
        &*driver,
        vec![
            JobFactory::new("walk.report")
                .queue("reports")
                .state(JobState::Scheduled, now + chrono::Duration::hours(1)),
            JobFactory::new("walk.report").queue("reports").attempts(1, 1).state(JobState::Discarded, now),
            JobFactory::new("walk.report").queue("reports").attempts(1, 1).state(JobState::Discarded, now),
            JobFactory::new("walk.report").queue("reports").attempts(1, 1).state(JobState::Discarded, now),
            JobFactory::new("walk.report").queue("reports"),
        ],
    )
    .await;
    let queues = serde_json::json!({"reports": {"limit": 10, "running": 0}});
    let beat = NodeHeartbeatParams {
        node: "node-a",
        host: "h",
        pid: 1,
        queues: &queues,
        kinds: &["walk.report"],
        kind_options: &serde_json::json!({}),
        now: None,
        lock: None,
        registering: false,
    };
    driver.node_heartbeat(beat).await.expect("heartbeat");
    let def = ScheduleDef {
        name: "nightly".into(),
        expression: "0 0 3 * * *".into(),
        timezone: "UTC".into(),
        kind: "walk.report".into(),
        args: "null".into(),
        options: serde_json::json!({"queue": "reports"}),
        missed_policy: "skip".into(),
    };
    driver.schedule_sync(ScheduleSyncParams { defs: &[def], retire_others: false }).await.expect("schedule");

    let config = jobs_dashboard::DashboardConfig::new(pool.clone()).refresh_seconds(3600);
    let (base, port, server) = serve_dashboard(config);
    let profile = std::env::temp_dir().join(format!("jobs-actions-{}-{port}", std::process::id()));
    let client = browser(chromedriver, &profile, size).await;
    client.goto(&format!("{base}/")).await.expect("open");
    eval(&client, &format!("localStorage.setItem('jobs-dashboard-theme', '{theme}'); return true")).await;
    let shot = |step: &str| format!("actions/{name}-{step}");

    // One job: cancel, retry, delete (which asks first).
    let job = ids[0];
    client.goto(&format!("{base}/jobs/{job}")).await.expect("job");
    click(&client, "#cancel").await;
    let expected = format!("job {job} cancelled");
    notice(&client, &expected, |n| n == expected).await;
    assert_eq!(state(&driver, job).await, Some(JobState::Cancelled));
    screenshot(&client, &shot("1-cancelled")).await;
    click(&client, "#retry").await;
    let expected = format!("job {job} retried");
    notice(&client, &expected, |n| n == expected).await;
    assert_eq!(state(&driver, job).await, Some(JobState::Available));
    click(&client, "#delete").await;
    client.accept_alert().await.expect("the delete prompt");
    let expected = format!("job {job} deleted");
    notice(&client, &expected, |n| n == expected).await;
    assert_eq!(state(&driver, job).await, None);
    screenshot(&client, &shot("2-deleted")).await;

    // A selection: cancel the available job.
    client.goto(&format!("{base}/jobs?state=available")).await.expect("available");
    click(&client, "input.select").await;
    click(&client, "#bulk-action option[value=cancel]").await;
    click(&client, "#bulk-selected").await;
    notice(&client, "1 of 1 selected jobs cancelled", |n| n == "1 of 1 selected jobs cancelled").await;
    assert_eq!(state(&driver, ids[4]).await, Some(JobState::Cancelled));

    // Everything matching a filter: retry the discarded jobs after the confirmation.
    client.goto(&format!("{base}/jobs?state=discarded")).await.expect("discarded");
    click(&client, "#bulk-all").await;
    let confirm = text(&client, "#confirm-text").await;
    assert!(confirm.contains("retry 3 jobs matching the current filter"), "{confirm}");
    screenshot(&client, &shot("3-confirm-all")).await;
    click(&client, "#confirm").await;
    notice(&client, "3 matching jobs retried", |n| n == "3 matching jobs retried").await;
    for id in &ids[1..4] {
        assert_eq!(state(&driver, *id).await, Some(JobState::Available));
    }

    // A queue: pause, resume, and set its concurrency for every node.
    client.goto(&format!("{base}/queues")).await.expect("queues");
    click(&client, "#queue-reports .queue-toggle").await;
    notice(&client, "queue reports paused", |n| n == "queue reports paused").await;
    click(&client, "#queue-reports .queue-toggle").await;
    notice(&client, "queue reports resumed", |n| n == "queue reports resumed").await;
    let input = client.find(Locator::Css("#queue-reports input[name=concurrency]")).await.expect("input");
    input.send_keys("3").await.expect("type");
    click(&client, "#queue-reports .limit-set").await;
    notice(&client, "about the limit", |n| n.contains("3 at a time on every node")).await;
    let stored =
        driver.queue_settings(QueueSettingsParams { queue: Some("reports") }).await.expect("settings");
    assert_eq!(stored.first().and_then(|s| s.concurrency), Some(3));
    screenshot(&client, &shot("4-queue-limit")).await;
    // And its limits across the cluster: at most 2 running, 100 started an hour.
    let global = client.find(Locator::Css("#queue-reports input[name=global_limit]")).await.expect("input");
    global.send_keys("2").await.expect("type");
    let rate = client.find(Locator::Css("#queue-reports input[name=rate_allowed]")).await.expect("input");
    rate.send_keys("100").await.expect("type");
    let period = client.find(Locator::Css("#queue-reports select[name=rate_period]")).await.expect("select");
    period.select_by_value("3600").await.expect("per hour");
    click(&client, "#queue-reports .limits-set").await;
    notice(&client, "about the limits", |n| n.contains("at most 2 running across the cluster, 100 per hour"))
        .await;
    let stored =
        driver.queue_settings(QueueSettingsParams { queue: Some("reports") }).await.expect("settings");
    let limits = stored.first().map(|s| (s.global_limit, s.rate_allowed, s.rate_period_secs));
    assert_eq!(limits, Some((Some(2), Some(100), Some(3600))));
    assert!(text(&client, "#queue-reports .queue-limits").await.contains("100 per hour started"));
    screenshot(&client, &shot("4-queue-limits")).await;

    // Cron: disable, enable, run now.
    client.goto(&format!("{base}/cron")).await.expect("cron");
    click(&client, "#schedule-nightly .schedule-toggle").await;
    notice(&client, "schedule nightly disabled", |n| n == "schedule nightly disabled").await;
    click(&client, "#schedule-nightly .schedule-toggle").await;
    notice(&client, "schedule nightly enabled", |n| n == "schedule nightly enabled").await;
    click(&client, "#schedule-nightly .schedule-run").await;
    notice(&client, "about run now", |n| n.starts_with("schedule nightly enqueued job")).await;
    let row = driver.schedule_get(ScheduleGetParams { name: "nightly" }).await.expect("read").expect("row");
    assert!(row.last_job_id.is_some(), "run now is recorded");
    assert_eq!(text(&client, "#schedule-nightly .run-now").await, "run now");
    screenshot(&client, &shot("5-cron-run-now")).await;

    // Enqueue from the form.
    client.goto(&format!("{base}/jobs/new")).await.expect("new");
    click(&client, "#enqueue-kind option[value='walk.report']").await;
    let args = client.find(Locator::Css("#enqueue-args")).await.expect("args");
    args.clear().await.expect("clear");
    args.send_keys(r#"{"report": "weekly"}"#).await.expect("type");
    let queue = client.find(Locator::Css("#enqueue-queue")).await.expect("queue");
    queue.clear().await.expect("clear");
    queue.send_keys("reports").await.expect("type");
    click(&client, "#enqueue-submit").await;
    let shown = notice(&client, "about the new job", |n| n.ends_with(" enqueued")).await;
    let id: i64 = shown
        .strip_prefix("job ")
        .and_then(|rest| rest.strip_suffix(" enqueued"))
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("a notice naming the new job: {shown}"));
    let enqueued = driver.job_get(JobGetParams { id }).await.expect("read").expect("the job");
    assert_eq!(enqueued.args, serde_json::json!({"report": "weekly"}));
    screenshot(&client, &shot("6-enqueued")).await;

    // The theme and live refresh toggles.
    let dark_before = eval(&client, "return document.documentElement.getAttribute('data-theme')").await;
    assert_eq!(dark_before, serde_json::json!(theme));
    click(&client, "#theme-toggle").await;
    let other = if theme == "dark" { "light" } else { "dark" };
    wait_for("the theme to switch", DEADLINE, || async {
        (eval(&client, "return document.documentElement.getAttribute('data-theme')").await
            == serde_json::json!(other))
        .then_some(())
    })
    .await;
    click(&client, "#live-toggle").await;
    assert_eq!(text(&client, "#live-toggle").await, "Live: off");
    screenshot(&client, &shot("7-toggled")).await;

    client.close().await.expect("close");
    let _ = std::fs::remove_dir_all(&profile);
    server.stop(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_action_works_in_the_browser_at_both_widths_and_themes() {
    let chromedriver = start_driver().await;
    walk(&chromedriver, (375, 812), "dark", "phone-dark").await;
    walk(&chromedriver, (1400, 1000), "light", "desktop-light").await;
}
