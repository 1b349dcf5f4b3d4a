//! The dashboard's views of worker nodes: which live nodes can run a waiting job, and each
//! node's running and buffered jobs per queue.

mod test_app;

use actix_web::http::StatusCode;
use jobs_core::testing::TestDatabase;
use jobs_dashboard::Access;
use test_app::{app, get, insert, new_job};

#[actix_web::test]
async fn a_waiting_job_says_which_live_nodes_can_run_it() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(
        &pool,
        vec![
            new_job("mail", "mailers", serde_json::json!({})),
            new_job("newer.kind", "mailers", serde_json::json!({})),
        ],
    )
    .await;
    let queues = serde_json::json!({"mailers": {"limit": 5, "running": 0}});
    for (node, kinds) in
        [("node-a", &["mail"][..]), ("node-b", &["mail", "report"][..]), ("node-c", &["report"][..])]
    {
        let beat = jobs_core::driver::NodeHeartbeatParams {
            node,
            host: "h",
            pid: 1,
            queues: &queues,
            kinds,
            kind_options: &serde_json::json!({}),
            now: None,
            lock: None,
            registering: false,
        };
        test_app::driver(&pool).node_heartbeat(beat).await.expect("heartbeat");
    }
    let app = app(&pool, Access::Full).await;
    let (_, body, _) = get(&app, &format!("/admin/jobs/jobs/{}", ids[0])).await;
    assert!(
        body.contains(r#"<dd id="runnable-on">node-b, node-a</dd>"#)
            || body.contains(r#"<dd id="runnable-on">node-a, node-b</dd>"#),
        "{body}"
    );
    let (_, body, _) = get(&app, &format!("/admin/jobs/jobs/{}", ids[1])).await;
    assert!(body.contains("no live node runs queue mailers with kind newer.kind registered"), "{body}");
}

#[actix_web::test]
async fn the_queues_page_shows_each_nodes_running_and_buffered_jobs() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let queues = serde_json::json!({"mailers": {"limit": 24, "running": 24, "buffered": 57}});
    test_app::live_node(&pool, queues, &["mail"], serde_json::json!({})).await;
    // A queue the node serves, and one no node serves (it used to read "running").
    let mut jobs = vec![test_app::new_job("mail", "mailers", serde_json::json!({}))];
    jobs.extend((0..1234).map(|_| test_app::new_job("mail", "orphans", serde_json::json!({}))));
    test_app::insert(&pool, jobs).await;
    let app = app(&pool, Access::Full).await;
    let (status, body, _) = get(&app, "/admin/jobs/queues").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("<th class=\"n\" title=\"claimed ahead of a free slot"), "{body}");
    assert!(
        body.contains(
            r#"<tr><td>node-a</td><td>mailers</td><td class="n">24</td><td class="n">57</td><td class="n">24</td></tr>"#
        ),
        "{body}"
    );
    let state = |queue: &str| {
        let row = body.split(&format!(r#"<tr id="queue-{queue}">"#)).nth(1).expect("the queue's row");
        row.split("</tr>").next().unwrap_or_default().to_owned()
    };
    assert!(
        state("mailers").contains(r#"<span class="badge queue-served">running on 1 node</span>"#),
        "{body}"
    );
    assert!(
        state("orphans").contains(r#"<span class="badge queue-unserved">no node serves it</span>"#),
        "{body}"
    );
    assert!(state("orphans").contains(r#"<td class="n">1,234</td>"#), "large numbers are grouped: {body}");
    let (_, overview, _) = get(&app, "/admin/jobs/").await;
    assert!(overview.contains("no node serves it") && overview.contains("1,234"), "{overview}");
}
