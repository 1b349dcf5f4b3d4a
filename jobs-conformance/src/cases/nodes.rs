//! Nodes: a dead one is known by its free liveness lock in seconds (its jobs and its lease
//! pass on), a name a live node holds is refused, a node keeps two runs of one job apart,
//! and a leader whose renewal hangs stops leading by its lease's end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use jobs_core::driver::{
    Capability, Completion, JobCancelManyParams, JobCompleteManyParams, JobState, NodeHeartbeatParams,
};
use jobs_core::maintenance::{LeaderConfig, LeaderElector, RescuerConfig, ServiceContext};
use jobs_core::{Error, ManualClock};

use crate::jobs::{Ledger, gated, wait_until_cancelled};
use crate::{DEADLINE, TestDb};
use jobs_core::testing::wait_for;

/// Far longer than the case: a node found dead within it was found by its lock.
const NEVER: Duration = Duration::from_secs(600);

/// The leader's process dies (its tasks stop and its connections close, as a `kill -9`
/// does) with a job running. Staleness is set far beyond the case (10 minutes), yet the
/// standby leads and runs the job within seconds: the dead node's liveness lock is free.
pub async fn a_dead_nodes_lock_frees_its_lease_and_its_jobs_in_seconds(db: TestDb) {
    let slow_to_judge = |node: &str| {
        db.worker()
            .node_name(node)
            .leader(LeaderConfig {
                ttl: NEVER,
                holder_stale_after: NEVER,
                lock_lost_grace: Duration::from_secs(1),
                interval: Duration::from_millis(100),
                ..LeaderConfig::default()
            })
            .rescuer(RescuerConfig {
                interval: Duration::from_millis(100),
                node_stale_after: NEVER,
                forget_nodes_after: NEVER,
                lock_lost_grace: Duration::from_secs(1),
                ..RescuerConfig::default()
            })
    };
    let doomed = slow_to_judge("doomed").build().expect("build").start().await.expect("start");
    assert!(doomed.is_leader());
    let id = wait_until_cancelled::enqueue(&db.driver, ()).await.expect("enqueue").id;
    db.wait_state(id, JobState::Running).await;
    let standby = slow_to_judge("standby").build().expect("build").start().await.expect("start");
    assert!(!standby.is_leader());

    let killed = Instant::now();
    doomed.kill();
    let row = wait_for("the standby to run the job", DEADLINE, || async {
        let row = db.job(id).await;
        (row.state == JobState::Running && row.attempt == 2).then_some(row)
    })
    .await;
    let took = killed.elapsed();
    assert!(standby.is_leader(), "the lease passed on");
    assert_eq!(row.attempted_by, vec!["doomed".to_owned(), "standby".to_owned()]);
    assert_eq!(row.errors[0]["error_type"], "rescued_node_lost");
    assert!(took < Duration::from_secs(20), "found dead by its lock, in {took:?}");
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[id] }).await.expect("cancel");
    db.wait_state(id, JobState::Cancelled).await;
    standby.shutdown().await.expect("shutdown");
}

/// A node whose name a live node holds refuses to start, naming the holder; once the
/// holder has stopped, the name is free again. Without liveness locks, a fresh heartbeat
/// under the name from another process stands for a live holder. Default names differ.
pub async fn a_node_name_in_use_is_refused(db: TestDb) {
    let first = db.worker().node_name("twin").build().expect("build").start().await.expect("start");
    let quick = |name: &str| {
        db.worker()
            .node_name(name)
            .rescuer(RescuerConfig { node_stale_after: Duration::from_secs(2), ..RescuerConfig::default() })
            .build()
            .expect("build")
    };
    if db.driver.capabilities().has(Capability::LivenessLocks) {
        match quick("twin").start().await {
            Err(Error::NodeNameTaken { node, holder }) => {
                assert_eq!(node, "twin");
                assert!(holder.contains("process"), "{holder}");
            }
            other => panic!("a second `twin` started: {other:?}"),
        }
    } else {
        // Another process heartbeats under `elsewhere` all along.
        let driver = db.driver.clone();
        let beating = tokio::spawn(async move {
            let queues = serde_json::json!({});
            loop {
                let beat = NodeHeartbeatParams {
                    node: "elsewhere",
                    host: "another-host",
                    pid: 4242,
                    queues: &queues,
                    kinds: &[],
                    kind_options: &serde_json::json!({}),
                    now: None,
                    lock: None,
                    registering: false,
                };
                let _ = driver.node_heartbeat(beat).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        wait_for("the other process's heartbeat", DEADLINE, || async {
            let nodes = db.driver.node_list(jobs_core::driver::NodeListParams {}).await.ok()?;
            nodes.iter().any(|n| n.name == "elsewhere").then_some(())
        })
        .await;
        match quick("elsewhere").start().await {
            Err(Error::NodeNameTaken { node, holder }) => {
                assert_eq!(node, "elsewhere");
                assert!(holder.contains("another-host"), "{holder}");
            }
            other => panic!("`elsewhere` started beside a live holder: {other:?}"),
        }
        beating.abort();
    }
    first.shutdown().await.expect("shutdown");
    let again = quick("twin").start().await.expect("the name is free once its holder stopped");
    again.shutdown().await.expect("shutdown");
    let (a, b) = (db.worker().build().expect("build"), db.worker().build().expect("build"));
    assert_ne!(a.node(), b.node(), "default names are unique per start");
}

/// A started node publishes each kind's options with its heartbeat, as `#[job(...)]`
/// declares them, and they read back whole (the dashboard and the command line enqueue a
/// kind they do not link with them): every registered kind, queue, attempts, timeout,
/// tags and uniqueness included.
pub async fn a_node_publishes_its_kinds_options(db: TestDb) {
    let registry = crate::registry();
    let node = db.worker().node_name("publisher").build().expect("build").start().await.expect("start");
    let row = wait_for("the node's row", DEADLINE, || async {
        let nodes = db.driver.node_list(jobs_core::driver::NodeListParams {}).await.ok()?;
        nodes.into_iter().find(|n| n.name == "publisher")
    })
    .await;
    let mut published = 0;
    for descriptor in registry.descriptors() {
        let declared = (descriptor.options)();
        let stored =
            row.kind_options.get(descriptor.kind).unwrap_or_else(|| panic!("{} published", descriptor.kind));
        assert_eq!(stored, &declared.to_published(), "{} as published", descriptor.kind);
        let back = jobs_core::JobOptions::from_published(stored).expect("reads back");
        assert_eq!(
            (&back.queue, back.priority, back.max_attempts, back.timeout, &back.tags, &back.unique),
            (
                &declared.queue,
                declared.priority,
                declared.max_attempts,
                declared.timeout,
                &declared.tags,
                &declared.unique
            ),
            "{}",
            descriptor.kind
        );
        published += 1;
    }
    assert_eq!(published, row.kinds.len(), "one entry per kind");
    assert!(
        registry.descriptors().any(|d| (d.options)().unique.is_some())
            && registry.descriptors().any(|d| (d.options)().timeout.is_some()),
        "the suite's kinds include uniqueness and timeouts"
    );
    node.shutdown().await.expect("shutdown");
}

/// A node frozen long enough for its job to be rescued (here: the rescuer's clock an hour
/// ahead) claims the job again while its first run still goes on. The two runs are kept
/// apart: the first one's end neither cancels nor releases the second, whose own outcome
/// then applies (a cancellation reaches it and it ends cancelled by its node).
pub async fn a_node_keeps_two_runs_of_one_job_apart(db: TestDb) {
    let ledger = Ledger::new();
    let node = db
        .worker()
        .node_name("frozen")
        .orphan_grace(Duration::from_millis(300))
        .heartbeat_interval(Duration::from_millis(100))
        .poll_interval(Duration::from_millis(50))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let id = gated::enqueue(&db.driver, ledger.gated(1)).await.expect("enqueue").id;
    wait_for("the first run", DEADLINE, || async { (ledger.runs().len() == 1).then_some(()) }).await;
    // Seen from an hour later, the node is silent: its job is rescued, and it claims it again.
    let later = ManualClock::new(Utc::now() + chrono::Duration::hours(1));
    let ctx = ServiceContext::new(db.driver.clone(), "leader").with_clock(Arc::new(later));
    let rescued = jobs_core::maintenance::Rescuer::new(RescuerConfig::default()).run_once(&ctx).await;
    assert_eq!(rescued.expect("rescue"), vec![id]);
    wait_for("the second run", DEADLINE, || async { (ledger.runs().len() == 2).then_some(()) }).await;
    assert_eq!(ledger.runs().iter().map(|r| r.attempt).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(node.running(), 2, "both runs held");

    // The first run ends; its outcome is fenced out, and the second run is still the node's.
    ledger.open_gate(1);
    wait_for("the first run to end", DEADLINE, || async { (node.running() == 1).then_some(()) }).await;
    let late = Completion { attempt: 1, ..crate::factory::succeeded(id, "work", 1) };
    let fenced = db.driver.job_complete_many(JobCompleteManyParams { completions: &[late], now: None }).await;
    assert!(fenced.expect("complete").is_empty());
    let row = db.job(id).await;
    assert_eq!((row.state, row.attempt), (JobState::Running, 2), "{:?}", row.errors);
    // The second run is still held, so the cancellation reaches it (a run the node had
    // lost track of would run on, and be released as orphaned).
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[id] }).await.expect("cancel");
    let row = db.wait_state(id, JobState::Cancelled).await;
    let last = row.errors.as_array().and_then(|e| e.last()).cloned().unwrap_or_default();
    assert_eq!(
        (last["error_type"].as_str(), last["attempt"].as_i64()),
        (Some("cancelled"), Some(2)),
        "{last}"
    );
    node.shutdown().await.expect("shutdown");
}

/// A leader's renewal that hangs (another transaction holds the lease's row, or the
/// database's write lock) does not keep it leading: it stops acting as leader by the end
/// of the lease it last renewed, counted on its own clock from that renewal's start.
pub async fn a_leader_whose_renewal_hangs_stops_leading_by_its_lease(db: TestDb) {
    let ttl = Duration::from_secs(2);
    let ctx = ServiceContext::new(db.driver.clone(), "leader");
    let elector = LeaderElector::new(LeaderConfig {
        ttl,
        interval: Duration::from_millis(500),
        ..LeaderConfig::default()
    });
    assert!(elector.run_once(&ctx).await.expect("elect"));
    let mut blocker = db.app_transaction().await;
    blocker.execute("UPDATE job_leaders SET leader_id = leader_id").await.expect("lock the lease");
    let renewal_started = Instant::now();
    let renewal = tokio::spawn({
        let (elector, ctx) = (elector.clone(), ctx.clone());
        async move { elector.run_once(&ctx).await }
    });
    wait_for("the leader to stop leading", DEADLINE, || async { (!ctx.is_leader()).then_some(()) }).await;
    let after = renewal_started.elapsed();
    assert!(after <= ttl + Duration::from_millis(500), "stopped leading {after:?} after the renewal began");
    assert!(!renewal.is_finished(), "the renewal still hangs");
    blocker.rollback().await.expect("rollback");
    let _ = renewal.await.expect("join");
}
