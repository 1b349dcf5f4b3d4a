//! The dashboard on a workflow, in a real headless Chromium: a step's page names its
//! workflow and lists what the step waits for; the workflow's link lists every member with
//! how many finished; "all matching" cancels the whole workflow after its confirmation, and
//! a retry of its cancelled members brings the chain back in order (the first available,
//! the next waiting for it). Screenshots go under `target/browser-screenshots/workflows/`.

use fantoccini::{Client, Locator};
use jobs_core::IntoDriver;
use jobs_core::driver::{
    Completion, DependsOn, Driver, JobClaimParams, JobCompleteManyParams, JobGetParams,
    JobInsertWorkflowParams, JobSettleParams, JobState, Needs, NewJob, NewStep, NewWorkflow, OnFailure,
};
use jobs_core::testing::TestDatabase;
use jobs_tests::browser::{DEADLINE, browser, click, screenshot, serve_dashboard, start_driver, text};
use jobs_tests::conformance::factory::succeeded;
use jobs_tests::wait_for;

async fn state(driver: &dyn Driver, id: i64) -> JobState {
    driver.job_get(JobGetParams { id }).await.expect("read").expect("the job").state
}

/// Waits until the page's notice reads `expected`.
async fn notice(client: &Client, expected: &str) {
    wait_for(&format!("the notice `{expected}`"), DEADLINE, || async {
        let shown = client.find(Locator::Css("#notice")).await.ok()?.text().await.ok()?;
        (shown == expected).then_some(())
    })
    .await
}

/// A chain of three steps (`signup-0` → `signup-1` → `signup-2`), its first completed
/// and settled as a worker's completer would.
async fn chain_with_its_head_done(driver: &dyn Driver) -> Vec<i64> {
    let steps = (0..3)
        .map(|i| NewStep {
            job: NewJob::new("signup.step", format!("signup-{i}"), "{}"),
            after: if i == 0 { vec![] } else { vec![DependsOn::Step(i - 1)] },
            needs: Needs::Completed,
        })
        .collect();
    let flow = NewWorkflow { name: "signup".into(), on_failure: OnFailure::Cancel, steps };
    let inserted = driver
        .job_insert_workflow(JobInsertWorkflowParams { workflow: &flow, now: None })
        .await
        .expect("insert");
    let ids: Vec<i64> = inserted.jobs.iter().map(|j| j.id).collect();
    let claim = JobClaimParams {
        queue: "signup-0",
        limit: 1,
        node: "node-a",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    let head = driver.job_claim(claim).await.expect("claim").pop().expect("the head");
    let done = Completion { workflow_id: head.workflow_id, ..succeeded(head.id, "signup-0", head.attempt) };
    driver
        .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
        .await
        .expect("complete");
    let settle = JobSettleParams { finished: Some(&ids[..1]), after: 0, limit: 100, now: None };
    driver.job_settle(settle).await.expect("settle");
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_is_followed_and_acted_on_whole_in_the_browser() {
    let chromedriver = start_driver().await;
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let driver = (&pool).into_driver();
    let ids = chain_with_its_head_done(&*driver).await;
    assert_eq!(state(&*driver, ids[1]).await, JobState::Available);

    let config = jobs_dashboard::DashboardConfig::new(pool.clone()).refresh_seconds(3600);
    let (base, port, server) = serve_dashboard(config);
    let profile = std::env::temp_dir().join(format!("jobs-workflows-{}-{port}", std::process::id()));
    let client = browser(&chromedriver, &profile, (1400, 1000)).await;

    // The last step: its workflow, and what it waits for.
    client.goto(&format!("{base}/jobs/{}", ids[2])).await.expect("the last step");
    let waits = text(&client, "#dependencies").await;
    assert!(waits.contains(&ids[1].to_string()) && waits.contains("not yet"), "{waits}");
    screenshot(&client, "workflows/1-step").await;

    // Its workflow: every member, one of three finished.
    click(&client, "#workflow-link").await;
    let progress = text(&client, "#workflow-progress").await;
    assert!(progress.contains("1 of 3 members finished"), "{progress}");
    assert_eq!(text(&client, "#workflow-name").await, "signup", "its name");
    assert!(progress.contains("cancels what waits"), "its setting: {progress}");
    let mut listed = Vec::new();
    for link in client.find_all(Locator::Css("#jobs .job-link")).await.expect("rows") {
        listed.push(link.text().await.expect("an id").parse::<i64>().expect("an id"));
    }
    listed.sort_unstable();
    assert_eq!(listed, ids, "the workflow's members, and only them");
    screenshot(&client, "workflows/2-members").await;

    // Cancel the whole workflow (after the confirmation).
    click(&client, "#bulk-action option[value=cancel]").await;
    click(&client, "#bulk-all").await;
    let confirm = text(&client, "#confirm-text").await;
    assert!(confirm.contains("cancel 3 jobs matching the current filter"), "{confirm}");
    click(&client, "#confirm").await;
    notice(&client, "2 matching jobs cancelled").await;
    assert_eq!(state(&*driver, ids[1]).await, JobState::Cancelled);
    assert_eq!(state(&*driver, ids[2]).await, JobState::Cancelled);
    assert_eq!(state(&*driver, ids[0]).await, JobState::Completed, "a finished member stays as it ended");

    // Retry its cancelled members: the chain comes back in order.
    let workflow =
        driver.job_get(JobGetParams { id: ids[0] }).await.expect("read").and_then(|j| j.workflow_id);
    let workflow = workflow.expect("a member names its workflow");
    client
        .goto(&format!("{base}/jobs?workflow={workflow}&state=cancelled"))
        .await
        .expect("cancelled members");
    click(&client, "#bulk-action option[value=retry]").await;
    click(&client, "#bulk-all").await;
    click(&client, "#confirm").await;
    notice(&client, "2 matching jobs retried").await;
    assert_eq!(state(&*driver, ids[1]).await, JobState::Available, "its dependency had completed");
    assert_eq!(state(&*driver, ids[2]).await, JobState::Pending, "it waits for the step before it");
    screenshot(&client, "workflows/3-retried").await;

    client.close().await.expect("close");
    let _ = std::fs::remove_dir_all(&profile);
    server.stop(true).await;
}
