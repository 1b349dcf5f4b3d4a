//! Every dashboard page in a real headless Chromium, in light and dark mode, at a phone's
//! width (375 px) and a desktop's: each page renders, nothing but a table scrolls sideways
//! on the phone, dark mode is dark, and a screenshot of each goes to
//! `target/browser-screenshots/walk/` for review. Then what only a browser shows: live
//! refresh swaps data in place and keeps going after a checkbox has had focus (it used to
//! stop silently), pauses visibly while rows are selected, keyboard shortcuts, and the
//! confirmation before deleting a selection.

use fantoccini::{Client, Locator};
use jobs_core::driver::{
    KindMetric, KindStatsCount, NodeHeartbeatParams, QueueSetLimitsParams, RateLimit, ScheduleDef,
    ScheduleSyncParams, StatsCount, StatsRecordParams,
};
use jobs_core::testing::TestDatabase;
use jobs_core::{IntoDriver, JobState};
use jobs_tests::browser::{DEADLINE, browser, screenshot, serve_dashboard, start_driver, text};
use jobs_tests::conformance::factory::{JobFactory, insert_all};
use jobs_tests::wait_for;

const SIZES: [(&str, (u32, u32)); 2] = [("desktop", (1400, 1000)), ("phone", (375, 812))];

async fn eval(client: &Client, script: &str) -> serde_json::Value {
    client.execute(script, vec![]).await.unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// Sets the theme the page's script reads, and reloads.
async fn set_theme(client: &Client, theme: &str) {
    eval(client, &format!("localStorage.setItem('jobs-dashboard-theme', '{theme}'); return true")).await;
    client.refresh().await.expect("reload");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_in_light_and_dark_at_phone_and_desktop_widths_then_live_refresh_and_shortcuts() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let driver = (&pool).into_driver();
    let now = chrono::Utc::now();
    let mut jobs: Vec<JobFactory> = JobState::ALL
        .iter()
        .flat_map(|s| {
            (0..3).map(move |i| {
                JobFactory::new("walk.report")
                    .queue(if i == 0 { "mailers" } else { "reports" })
                    .state(*s, now)
            })
        })
        .collect();
    jobs.push(JobFactory::new("walk.a-kind-with-a-rather-long-name-that-wraps").queue("reports"));
    // Customers' jobs under limits, for the queues page's "Limits in use" and "why waiting".
    for (customer, state) in [
        ("acme-corporation-europe", JobState::Running),
        ("acme-corporation-europe", JobState::Available),
        ("globex", JobState::Running),
    ] {
        jobs.push(
            JobFactory::new("walk.report")
                .queue("exports")
                .meta(serde_json::json!({ "_partition_key": customer }))
                .state(state, now),
        );
    }
    let ids = insert_all(&*driver, jobs).await;
    let queues = serde_json::json!({"reports": {"limit": 10, "running": 3, "buffered": 2}});
    let beat = NodeHeartbeatParams {
        node: "node-a",
        host: "host-1",
        pid: 42,
        queues: &queues,
        kinds: &["walk.report"],
        kind_options: &serde_json::json!({}),
        now: None,
        lock: None,
        registering: false,
    };
    driver.node_heartbeat(beat).await.expect("heartbeat");
    let rate = Some(RateLimit { allowed: 600, period_secs: 60 });
    let limits = QueueSetLimitsParams {
        queue: "exports",
        global_limit: Some(40),
        per_key_limit: Some(1),
        rate,
        per_key_rate: Some(RateLimit { allowed: 30, period_secs: 3600 }),
    };
    driver.queue_set_limits(limits).await.expect("limits");
    let def = ScheduleDef {
        name: "nightly-report".into(),
        expression: "0 0 3 * * *".into(),
        timezone: "Europe/Paris".into(),
        kind: "walk.report".into(),
        args: "null".into(),
        options: serde_json::json!({"queue": "reports"}),
        missed_policy: "skip".into(),
    };
    driver.schedule_sync(ScheduleSyncParams { defs: &[def], retire_others: false }).await.expect("schedule");
    // A minute of outcomes and durations, for the chart and the kinds page.
    let minute = chrono::Utc::now();
    let counts = [
        StatsCount { minute, queue: "reports", state: JobState::Completed, count: 1_234 },
        StatsCount { minute, queue: "reports", state: JobState::Retryable, count: 56 },
    ];
    let kinds = [
        KindStatsCount { minute, kind: "walk.report", metric: KindMetric::Completed, idx: 0, count: 1_234 },
        KindStatsCount { minute, kind: "walk.report", metric: KindMetric::Retried, idx: 0, count: 56 },
        KindStatsCount { minute, kind: "walk.report", metric: KindMetric::RunMs, idx: 9, count: 1_290 },
        KindStatsCount { minute, kind: "walk.report", metric: KindMetric::WaitMs, idx: 3, count: 1_290 },
    ];
    driver.stats_record(StatsRecordParams { counts: &counts, kinds: &kinds }).await.expect("stats");

    let config = jobs_dashboard::DashboardConfig::new(pool.clone()).refresh_seconds(1);
    let (base, port, server_handle) = serve_dashboard(config);
    let pages = [
        ("overview", "/".to_owned(), "Overview"),
        ("jobs", "/jobs".to_owned(), "Jobs"),
        ("jobs-discarded", "/jobs?state=discarded".to_owned(), "Jobs"),
        ("job", format!("/jobs/{}", ids[0]), "Job"),
        ("queues", "/queues".to_owned(), "Queues"),
        ("kinds", "/kinds".to_owned(), "Kinds"),
        ("overview-week", "/?chart=week".to_owned(), "Overview"),
        ("search", "/jobs?q=user_id%3D7".to_owned(), "Jobs"),
        ("cron", "/cron".to_owned(), "Cron schedules"),
        ("enqueue", "/jobs/new".to_owned(), "Enqueue a job"),
        ("not-found", "/jobs/999999999".to_owned(), "Not found"),
    ];

    let chromedriver = start_driver().await;
    for (size_name, size) in SIZES {
        let profile =
            std::env::temp_dir().join(format!("jobs-walk-{}-{port}-{size_name}", std::process::id()));
        let client = browser(&chromedriver, &profile, size).await;
        client.goto(&format!("{base}/")).await.expect("open");
        let width = eval(&client, "return window.innerWidth").await.as_u64().expect("width");
        assert!(width <= u64::from(size.0), "{size_name}: the window is {width} px wide");
        for theme in ["light", "dark"] {
            set_theme(&client, theme).await;
            for (name, path, heading) in &pages {
                client.goto(&format!("{base}{path}")).await.expect("open page");
                let h1 = text(&client, "h1").await;
                assert!(h1.starts_with(heading), "{name}: {h1}");
                if *name == "queues" {
                    // Read in one step: live refresh replaces the table every second.
                    let script = "return document.querySelector('#limits-exports .limits-keys').textContent";
                    let keys = eval(&client, script).await;
                    let expected = "2 keys running, 2 at their limit of 10 keys used up their 30 per hour";
                    assert_eq!(keys, expected, "{size_name} {theme}");
                }
                // Only tables scroll sideways; the page itself fits the window.
                let overflow =
                    eval(&client, "return document.documentElement.scrollWidth - window.innerWidth").await;
                assert!(
                    overflow.as_i64().expect("px") <= 0,
                    "{name} at {size_name} overflows by {overflow} px"
                );
                let background =
                    eval(&client, "return getComputedStyle(document.body).backgroundColor").await;
                let dark = background.as_str().is_some_and(|c| c.starts_with("rgb(18, 21, 28"));
                assert_eq!(dark, theme == "dark", "{name} {theme}: body background {background}");
                screenshot(&client, &format!("walk/{size_name}-{theme}-{name}")).await;
            }
        }
        set_theme(&client, "light").await;
        client.close().await.expect("close");
        let _ = std::fs::remove_dir_all(&profile);
    }

    // Live refresh, keyboard and confirmation, at desktop width.
    let profile = std::env::temp_dir().join(format!("jobs-walk-{}-{port}-live", std::process::id()));
    let client = browser(&chromedriver, &profile, (1400, 1000)).await;
    client.goto(&format!("{base}/jobs?state=discarded")).await.expect("open jobs");
    // A checkbox of the state filter gets focus (clicked twice: left as it was).
    let filter_box = client.find(Locator::Css("#filters input[value=retryable]")).await.expect("checkbox");
    filter_box.click().await.expect("check");
    filter_box.click().await.expect("uncheck");
    assert_eq!(eval(&client, "return document.activeElement.type").await, "checkbox");
    assert_eq!(text(&client, "#live-toggle").await, "Live: on", "a focused checkbox does not hold refresh");
    // A job that arrives is shown without a reload, with the checkbox still focused.
    let arrived = insert_all(
        &*driver,
        vec![JobFactory::new("walk.late").queue("reports").state(JobState::Discarded, now)],
    )
    .await[0];
    let link = format!("a.job-link[href$='/jobs/{arrived}']");
    wait_for("live refresh to show the new job", DEADLINE, || async {
        client.find(Locator::Css(&link)).await.ok().map(|_| ())
    })
    .await;
    assert_eq!(eval(&client, "return document.activeElement.type").await, "checkbox", "refreshed in place");

    // Selecting a row holds refresh, and says so.
    client.find(Locator::Css("input.select")).await.expect("a row box").click().await.expect("select");
    assert_eq!(text(&client, "#live-toggle").await, "Live: paused: 1 selected");
    screenshot(&client, "walk/live-held-while-selecting").await;
    // Deleting the selection asks first.
    client
        .find(Locator::Css("#bulk-action option[value=delete]"))
        .await
        .expect("delete")
        .click()
        .await
        .expect("choose");
    client.find(Locator::Css("#bulk-selected")).await.expect("selected").click().await.expect("submit");
    assert_eq!(
        text(&client, "#confirm-text").await,
        "This will delete 1 selected jobs: deleted jobs cannot be brought back."
    );
    screenshot(&client, "walk/confirm-delete").await;
    client.find(Locator::Css("#confirm-cancel")).await.expect("cancel").click().await.expect("go back");

    // Keyboard: ? shows the help, j moves through rows, / goes to the search box.
    client.goto(&format!("{base}/jobs")).await.expect("open jobs");
    let body = client.find(Locator::Css("body")).await.expect("body");
    body.send_keys("?").await.expect("?");
    assert_eq!(eval(&client, "return document.getElementById('shortcuts').hidden").await, false);
    screenshot(&client, "walk/shortcuts").await;
    body.send_keys("jj").await.expect("j");
    assert_eq!(eval(&client, "return document.querySelectorAll('tr.cursor').length").await, 1);
    let second = eval(
        &client,
        "return document.querySelector('main table tbody tr:nth-child(2)').classList.contains('cursor')",
    )
    .await;
    assert_eq!(second, true, "two j's: the second row");
    body.send_keys("/").await.expect("/");
    assert_eq!(eval(&client, "return document.activeElement.id").await, "search");

    client.close().await.expect("close browser");
    let _ = std::fs::remove_dir_all(&profile);
    server_handle.stop(true).await;
}
