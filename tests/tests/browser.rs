//! The dashboard in a real headless Chromium (Debian's `chromium` and `chromium-driver`),
//! driven over WebDriver, with a real worker behind it: open the overview, filter to the
//! failed jobs, open one, read its error, retry it and watch it complete; bulk-retry; pause
//! a queue. Screenshots go to `target/browser-screenshots/`.

use fantoccini::{Client, Locator};
use jobs_core::postgres::Pool;
use jobs_core::testing::TestDatabase;
use jobs_core::{JobContext, JobState, Registry, Worker, enqueue_many, job};
use jobs_tests::browser::{DEADLINE, browser, screenshot, serve_dashboard, start_driver, text};
use jobs_tests::wait_for;

/// Fails its first attempt, succeeds on a retry.
#[job(kind = "browser.charge", queue = "browser", max_attempts = 1)]
async fn charge(ctx: JobContext, order: i64) -> Result<String, std::io::Error> {
    if ctx.attempt() == 1 {
        return Err(std::io::Error::other(format!("card declined for order {order}")));
    }
    Ok(format!("charged order {order}"))
}

async fn job_state(pool: &Pool, id: i64) -> JobState {
    let mut conn = pool.get().await.expect("conn");
    jobs_core::get_job(&mut conn, id).await.expect("get").expect("job").state
}

/// Reloads until `css`'s text is `expected` (the page shows the database's state).
async fn reload_until(client: &Client, css: &str, expected: &str) {
    wait_for(&format!("{css} to show {expected:?}"), DEADLINE, || async {
        client.refresh().await.ok()?;
        let text = client.find(Locator::Css(css)).await.ok()?.text().await.ok()?;
        (text == expected).then_some(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_a_failed_job_from_the_browser_then_bulk_retry_and_pause_a_queue() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let worker = Worker::builder(pool.clone())
        .queue("browser", 5)
        .registry(Registry::new().with::<charge>().expect("registry"))
        .build()
        .expect("worker")
        .start()
        .await
        .expect("start");
    let ids: Vec<i64> = enqueue_many(&pool, (1..=3).map(charge::build))
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    for &id in &ids {
        wait_for("the first attempts to fail", DEADLINE, || async {
            (job_state(&pool, id).await == JobState::Discarded).then_some(())
        })
        .await;
    }

    // The dashboard, mounted in an app served on a real port.
    let config = jobs_dashboard::DashboardConfig::new(pool.clone()).refresh_seconds(3600);
    let (base, port, server_handle) = serve_dashboard(config);

    let driver = start_driver().await;
    let profile = std::env::temp_dir().join(format!("jobs-chromium-{}-{}", std::process::id(), port));
    let client = browser(&driver, &profile, (1400, 1000)).await;

    // 1. The overview.
    client.goto(&format!("{base}/")).await.expect("open overview");
    assert_eq!(text(&client, "h1").await, "Overview");
    assert_eq!(text(&client, "a.card.state-discarded .n").await, "3");
    // Live refresh has a pause control.
    client.find(Locator::Css("#live-toggle")).await.expect("toggle").click().await.expect("click");
    assert_eq!(text(&client, "#live-toggle").await, "Live: off");
    screenshot(&client, "01-overview").await;

    // 2. Filter to the failed jobs and open one.
    client.find(Locator::Css("a.card.state-discarded")).await.expect("card").click().await.expect("click");
    let links = client.find_all(Locator::Css("a.job-link")).await.expect("rows");
    assert_eq!(links.len(), 3);
    screenshot(&client, "02-failed-jobs").await;
    let newest = ids[2];
    client
        .find(Locator::LinkText(&newest.to_string()))
        .await
        .expect("job link")
        .click()
        .await
        .expect("open job");

    // 3. Its error.
    assert_eq!(text(&client, "#job-state").await, "discarded");
    assert_eq!(text(&client, ".error-message").await, format!("card declined for order 3"));
    screenshot(&client, "03-job-error").await;

    // 4. Retry, and watch it complete.
    client.find(Locator::Css("#retry")).await.expect("retry button").click().await.expect("retry");
    assert!(text(&client, "#notice").await.contains("retried"));
    reload_until(&client, "#job-state", "completed").await;
    assert!(text(&client, "#result").await.contains("charged order 3"));
    screenshot(&client, "04-job-completed").await;

    // Bulk: select every failed job on the page and retry them.
    client.goto(&format!("{base}/jobs?state=discarded")).await.expect("failed list");
    client.find(Locator::Css("#select-all")).await.expect("select all").click().await.expect("check");
    client.find(Locator::Css("#bulk-selected")).await.expect("bulk").click().await.expect("submit");
    assert_eq!(text(&client, "#notice").await, "2 of 2 selected jobs retried");
    screenshot(&client, "05-bulk-retried").await;
    for &id in &ids[..2] {
        wait_for("the bulk-retried jobs to complete", DEADLINE, || async {
            (job_state(&pool, id).await == JobState::Completed).then_some(())
        })
        .await;
    }

    // Pause the queue.
    client.goto(&format!("{base}/queues")).await.expect("queues");
    client
        .find(Locator::Css("#queue-browser .queue-toggle"))
        .await
        .expect("pause")
        .click()
        .await
        .expect("click");
    assert_eq!(text(&client, "#notice").await, "queue browser paused");
    assert_eq!(text(&client, "#queue-browser .queue-state").await, "paused");
    screenshot(&client, "06-queue-paused").await;
    let paused = jobs_core::driver::QueueIsPausedParams { queue: "browser" };
    assert!(jobs_core::IntoDriver::into_driver(&pool).queue_is_paused(paused).await.expect("paused"));

    // Script planted in a job's kind, queue, arguments and error never runs: it shows as
    // text (escaped), and the page's CSP would stop it besides.
    let planted = {
        let payload = "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>";
        let mut job =
            jobs_core::NewJob::new(payload, "browser", serde_json::json!({ "html": payload }).to_string());
        job.max_attempts = 1;
        let mut conn = pool.get().await.expect("conn");
        jobs_core::postgres::connection::insert_many(&mut conn, &[job], None).await.expect("insert")[0].id
    };
    for page in [format!("{base}/jobs/{planted}"), format!("{base}/jobs?queue=browser"), format!("{base}/")] {
        client.goto(&page).await.expect("open page");
        let ran = client.execute("return typeof window.__xss", vec![]).await.expect("script");
        assert_eq!(ran, serde_json::json!("undefined"), "planted script ran on {page}");
    }
    client.goto(&format!("{base}/jobs/{planted}")).await.expect("open planted job");
    let shown =
        client.execute("return document.body.innerText.includes('<script>window.__xss=2')", vec![]).await;
    assert_eq!(shown.expect("script"), serde_json::json!(true), "the payload is shown as text");
    screenshot(&client, "07-planted-script-inert").await;

    client.close().await.expect("close browser");
    let _ = std::fs::remove_dir_all(&profile);
    server_handle.stop(true).await;
    worker.shutdown().await.expect("shutdown");
}
