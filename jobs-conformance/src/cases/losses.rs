//! Jobs taken back from their node: a node's loss does not use up a job's attempts (a job
//! claimed on its last attempt and lost with its node, or whose claim never arrived, runs
//! again), a job lost again and again ends discarded, and a cancel requested meanwhile
//! wins (the shared rule, `jobs_driver::RescueFate`).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{JobClaimParams, JobState, NODE_LOST};
use jobs_core::maintenance::{Rescuer, RescuerConfig, ServiceContext};
use jobs_core::{Clock, ManualClock};
use serde_json::json;

use super::rescue::{heartbeat, start_survivor};
use crate::factory::{JobFactory, insert_all};
use crate::jobs::{Ledger, once};
use crate::{DEADLINE, TestDb};
use jobs_core::testing::wait_for;

/// Jobs of one attempt (`max_attempts = 1`) that a node claimed and never started (claimed
/// ahead into its buffer) are not discarded when the node dies: the rescue does not count
/// the lost attempt, they run once elsewhere. One whose claim's reply its own (live) node
/// never received is handed back by that node, its attempt not counted either.
pub async fn jobs_lost_with_their_node_on_their_last_attempt_run_again(db: TestDb) {
    let ledger = Ledger::new();
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(once::enqueue(&db.driver, ledger.record(n)).await.expect("enqueue").id);
    }
    let claim = JobClaimParams {
        queue: "work",
        limit: 5,
        node: "doomed",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    let claimed = db.driver.job_claim(claim).await.expect("claim");
    assert_eq!(claimed.len(), 5);
    assert!(claimed.iter().all(|j| (j.attempt, j.max_attempts) == (1, 1)), "each on its last attempt");
    // The node died holding them, none started.
    heartbeat(&db, "doomed", Utc::now() - chrono::Duration::minutes(1)).await;
    let survivor = db
        .worker()
        .node_name("survivor")
        .orphan_grace(Duration::from_millis(200))
        .rescuer(RescuerConfig { interval: Duration::from_millis(100), ..RescuerConfig::default() })
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    for &id in &ids {
        let row = db.wait_state(id, JobState::Completed).await;
        assert_eq!((row.attempt, row.max_attempts), (2, 2), "job {id}: the lost attempt did not count");
        assert_eq!(row.errors[0]["error_type"], NODE_LOST, "job {id}");
        assert_eq!(row.errors[0]["attempt"], 1);
    }
    // A lost claim: the survivor claimed a job (of a queue it does not serve, so that it
    // does not run it after) and the reply never arrived. It hands the job back itself.
    let lost =
        once::build(ledger.record(9)).queue("elsewhere").enqueue(&db.driver).await.expect("enqueue").id;
    let lose = JobClaimParams { queue: "elsewhere", node: "survivor", limit: 1, ..claim };
    assert_eq!(db.driver.job_claim(lose).await.expect("claim")[0].id, lost);
    let row = db.wait_state(lost, JobState::Available).await;
    assert_eq!((row.attempt, row.max_attempts), (1, 2), "the lost claim's attempt does not count");
    assert_eq!(row.errors[0]["error_type"], "rescued_orphaned");
    let runs = ledger.runs();
    assert_eq!(runs.len(), 5, "each job ran once: {runs:?}");
    assert!(runs.iter().all(|r| r.attempt == 2 && r.node == "survivor"), "{runs:?}");
    survivor.shutdown().await.expect("shutdown");
}

/// The rescue's rule on every backend: a cancel requested wins (whether the node was lost
/// or the job overran its timeout); an overrun timeout uses the attempt (the last one: one
/// more allowed, as the run may never have started); a node's loss does not, even once the job is past its timeout (its run may
/// never have started), nor does a claim by an earlier process of a node's name (a restart
/// with a fixed name); a job lost with its node as often as the rescuer allows
/// (`max_node_losses`) is discarded, whatever attempts it has left.
pub async fn the_rescue_follows_one_rule_for_cancels_timeouts_and_losses(db: TestDb) {
    let start = Utc::now();
    let clock = ManualClock::new(start);
    let lost_before = |n: usize| -> Vec<serde_json::Value> {
        (1..=n)
            .map(|a| json!({"attempt": a, "at": start, "error_type": NODE_LOST, "message": "lost"}))
            .collect()
    };
    // Earlier rescues: `lost` node losses, `uncertain` timeouts on a last attempt (they
    // count), `timeouts` that used their attempt (they do not).
    let rescued_before = |lost: usize, uncertain: usize, timeouts: usize| -> Vec<serde_json::Value> {
        let entry = |kind: &str, extra: bool| {
            let mut e = json!({"attempt": 1, "at": start, "error_type": kind, "message": "rescued"});
            if extra {
                e["uncertain"] = json!(true);
            }
            e
        };
        std::iter::repeat_n(entry(NODE_LOST, false), lost)
            .chain(std::iter::repeat_n(entry("rescued_timeout", true), uncertain))
            .chain(std::iter::repeat_n(entry("rescued_timeout", false), timeouts))
            .collect()
    };
    let running = |node: &str| {
        JobFactory::new("conformance.record")
            .args(json!({"ledger": 0, "n": 1}))
            .claimed_by(node)
            .state(JobState::Running, start)
    };
    // The live node registered before its claims.
    heartbeat(&db, "live", start).await;
    let ids = insert_all(
        &*db.driver,
        vec![
            // 0: node lost, a cancel requested.
            running("gone").cancel_requested(start),
            // 1: timed out on a live node, a cancel requested.
            running("live").timeout_ms(100).cancel_requested(start),
            // 2: timed out on its last attempt.
            running("live").timeout_ms(100).attempts(3, 3),
            // 3: node lost on its last attempt.
            running("gone").attempts(3, 3),
            // 4: lost three times before, many attempts left: once more is fine.
            running("gone").attempts(4, 20).errors(lost_before(3)),
            // 5: lost four times before: the fifth loss discards it.
            running("gone").attempts(5, 20).errors(lost_before(4)),
            // 6: its node gone, and past its timeout too, on its last attempt.
            running("gone").timeout_ms(100).attempts(1, 1),
            // 7: claimed by an earlier process of a node that has restarted since.
            running("restarted").attempts(1, 1),
            // 8: timed out on its last attempt, rescued unknowing four times before (lost
            // twice, timed out on its last attempt twice), timed out twice more before.
            running("live").timeout_ms(100).attempts(3, 3).errors(rescued_before(2, 2, 2)),
            // 9: the same, rescued unknowing three times only.
            running("live").timeout_ms(100).attempts(3, 3).errors(rescued_before(2, 1, 3)),
        ],
    )
    .await;
    clock.advance(Duration::from_secs(60));
    heartbeat(&db, "live", clock.now()).await;
    let queues = json!({});
    let restart = jobs_core::driver::NodeHeartbeatParams {
        node: "restarted",
        host: "host",
        pid: 1,
        queues: &queues,
        kinds: &[],
        kind_options: &serde_json::json!({}),
        now: Some(clock.now()),
        lock: None,
        registering: true,
    };
    db.driver.node_heartbeat(restart).await.expect("the new process registers");
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer").with_clock(Arc::new(clock.clone()));
    let rescuer = Rescuer::new(RescuerConfig { max_node_losses: 5, ..RescuerConfig::default() });
    let mut rescued = rescuer.run_once(&ctx).await.expect("rescue");
    rescued.sort_unstable();
    assert_eq!(rescued, ids);
    let expected = [
        (JobState::Cancelled, 20, "rescued_node_lost"),
        (JobState::Cancelled, 20, "rescued_timeout"),
        (JobState::Available, 4, "rescued_timeout"),
        (JobState::Available, 4, "rescued_node_lost"),
        (JobState::Available, 21, "rescued_node_lost"),
        (JobState::Discarded, 20, "rescued_node_lost"),
        (JobState::Available, 2, "rescued_node_lost"),
        (JobState::Available, 2, "rescued_node_lost"),
        (JobState::Discarded, 3, "rescued_timeout"),
        (JobState::Available, 4, "rescued_timeout"),
    ];
    for (id, (state, max_attempts, why)) in ids.iter().zip(expected) {
        let row = db.job(*id).await;
        assert_eq!((row.state, row.max_attempts), (state, max_attempts), "job {id}");
        assert_eq!(row.finalized_at.is_some(), state.is_final(), "job {id}");
        let entry = row.errors.as_array().and_then(|e| e.last()).cloned().unwrap_or_default();
        assert_eq!(entry["error_type"], why, "job {id}");
        assert_eq!(entry["attempt"], row.attempt, "job {id}: the entry names the rescued attempt");
    }
    let poisoned = db.job(ids[5]).await;
    let message = poisoned.errors[4]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("5 times"), "{message}");
    // A claim whose reply its live node never received, found by that node's orphan check
    // once past its timeout too: an orphan still (it never started), its attempt not used.
    let orphan = running("live").timeout_ms(100).attempts(1, 1).insert(&*db.driver).await;
    let release = jobs_core::driver::JobReleaseOrphansParams {
        node: "live",
        held: &[],
        grace: Duration::from_secs(5),
        now: Some(clock.now()),
    };
    assert_eq!(db.driver.job_release_orphans(release).await.expect("release"), vec![orphan]);
    let row = db.job(orphan).await;
    assert_eq!((row.state, row.max_attempts), (JobState::Available, 2));
    assert_eq!(row.errors[0]["error_type"], "rescued_orphaned");
    // A survivor runs what went back; nothing else moves.
    let survivor = start_survivor(&db).await;
    for id in [ids[3], ids[4], ids[6], ids[7]] {
        let row = db.wait_state(id, JobState::Completed).await;
        assert_eq!(row.attempted_by.last().map(String::as_str), Some("survivor"));
    }
    wait_for("the survivor to finish", DEADLINE, || async { (survivor.running() == 0).then_some(()) }).await;
    survivor.shutdown().await.expect("shutdown");
}
