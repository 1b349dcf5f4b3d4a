//! Jobs nobody runs any more come back: dead nodes, overrun timeouts, lost claim replies;
//! late outcomes are fenced out; one leader at a time.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_core::driver::{
    Completion, JobCancelManyParams, JobClaimParams, JobCompleteManyParams, JobGetParams, JobState,
    NodeHeartbeatParams,
};
use jobs_core::maintenance::{
    LeaderConfig, LeaderElector, Rescuer, RescuerConfig, SchedulerConfig, ServiceContext,
};
use jobs_core::{Clock, ManualClock};

use crate::factory::JobFactory;
use crate::jobs::{Behaviour, Ledger, behave, record, wait_until_cancelled};
use crate::{DEADLINE, TestDb};
use jobs_core::testing::wait_for;

/// Records a heartbeat of `node` at `at`, as a live worker would.
pub(crate) async fn heartbeat(db: &TestDb, node: &str, at: DateTime<Utc>) {
    let queues = serde_json::json!({});
    let params = NodeHeartbeatParams {
        node,
        host: "host",
        pid: 1,
        queues: &queues,
        kinds: &[],
        kind_options: &serde_json::json!({}),
        now: Some(at),
        lock: None,
        registering: false,
    };
    db.driver.node_heartbeat(params).await.expect("heartbeat");
}

fn claim(node: &str, now: Option<DateTime<Utc>>) -> JobClaimParams<'_> {
    JobClaimParams {
        queue: "work",
        limit: 10,
        node,
        now,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    }
}

/// A node claims a job and goes silent; the rescuer returns it; the node's late
/// completion, at its old attempt, changes nothing, before and after the job is claimed
/// again; the current claim's completion applies.
pub async fn a_late_completion_after_a_rescue_is_ignored(db: TestDb) {
    let ledger = Ledger::new();
    let id = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    let claimed = db.driver.job_claim(claim("ghost-node", None)).await.expect("claim");
    assert_eq!((claimed.len(), claimed[0].attempt), (1, 1));
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer-node");
    let rescued = Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue");
    assert_eq!(rescued, vec![id]);
    let row = db.job(id).await;
    assert_eq!(row.state, JobState::Available, "back in line at once");
    assert_eq!(row.errors[0]["error_type"], "rescued_node_lost");

    let late = Completion { result: Some("\"late\"".into()), ..crate::factory::succeeded(id, "work", 1) };
    let complete = |c: &Completion| {
        let c = c.clone();
        let driver = db.driver.clone();
        async move {
            driver
                .job_complete_many(JobCompleteManyParams { completions: &[c], now: None })
                .await
                .expect("complete")
        }
    };
    assert!(complete(&late).await.is_empty());
    assert_eq!(db.job(id).await.state, JobState::Available);

    let again = db.driver.job_claim(claim("ghost-node", None)).await.expect("claim");
    assert_eq!(again[0].attempt, 2);
    assert!(complete(&late).await.is_empty());
    let current = Completion { attempt: 2, result: Some("\"on time\"".into()), ..late };
    assert_eq!(complete(&current).await, vec![id]);
    let row = db.job(id).await;
    assert_eq!((row.state, row.result), (JobState::Completed, Some(serde_json::json!("on time"))));
}

/// Starts node "survivor", which leads and rescues and schedules every 100 ms.
pub(crate) async fn start_survivor(db: &TestDb) -> jobs_core::WorkerHandle {
    db.worker()
        .node_name("survivor")
        .rescuer(RescuerConfig { interval: Duration::from_millis(100), ..RescuerConfig::default() })
        .scheduler(SchedulerConfig { interval: Duration::from_millis(100), ..SchedulerConfig::default() })
        .build()
        .expect("build")
        .start()
        .await
        .expect("start")
}

/// A node dies with a job running; once its heartbeat is stale, a surviving leader
/// rescues the job and runs it; a cancellation then reaches the survivor.
pub async fn a_dead_nodes_jobs_are_rescued_and_run_elsewhere(db: TestDb) {
    let doomed = db.worker().node_name("doomed").without_maintenance().build().expect("build");
    let doomed = doomed.start().await.expect("start");
    let id = wait_until_cancelled::enqueue(&db.driver, ()).await.expect("enqueue").id;
    db.wait_state(id, JobState::Running).await;
    doomed.kill();
    // Its row says it was last seen a minute ago (rather than wait for it to go stale).
    heartbeat(&db, "doomed", Utc::now() - chrono::Duration::minutes(1)).await;

    let survivor = start_survivor(&db).await;
    assert!(survivor.is_leader());
    let row = wait_for("the survivor to pick the job up", DEADLINE, || async {
        let row = db.driver.job_get(JobGetParams { id }).await.ok()??;
        (row.state == JobState::Running && row.attempt == 2).then_some(row)
    })
    .await;
    assert_eq!(row.attempted_by, vec!["doomed".to_owned(), "survivor".to_owned()]);
    assert_eq!(row.errors[0]["error_type"], "rescued_node_lost");

    let told = db.driver.job_cancel_many(JobCancelManyParams { ids: &[id] }).await.expect("cancel");
    assert_eq!(told, vec![JobState::Running], "a running job is told to stop");
    let row = db.wait_state(id, JobState::Cancelled).await;
    assert!(row.finalized_at.is_some());
    survivor.shutdown().await.expect("shutdown");
}

/// A job running past its timeout plus the grace is rescued although its node heartbeats;
/// on its last attempt it gets one more (the rescuer cannot tell an overrun from a claim
/// whose reply never arrived).
pub async fn a_job_past_its_timeout_on_a_live_node_is_rescued_and_fenced(db: TestDb) {
    let start = Utc::now();
    let clock = ManualClock::new(start);
    let id = behave::enqueue(&db.driver, Behaviour::Hang).await.expect("enqueue").id; // 300 ms timeout
    heartbeat(&db, "stuck-node", start).await;
    let claimed = db.driver.job_claim(claim("stuck-node", Some(start))).await.expect("claim");
    assert_eq!(claimed[0].id, id);
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer").with_clock(Arc::new(clock.clone()));
    let rescuer =
        Rescuer::new(RescuerConfig { timeout_grace: Duration::from_secs(5), ..RescuerConfig::default() });

    clock.advance(Duration::from_secs(5));
    heartbeat(&db, "stuck-node", clock.now()).await;
    assert!(rescuer.run_once(&ctx).await.expect("rescue").is_empty(), "within timeout and grace");
    clock.advance(Duration::from_secs(1));
    heartbeat(&db, "stuck-node", clock.now()).await;
    assert_eq!(rescuer.run_once(&ctx).await.expect("rescue"), vec![id]);
    let row = db.job(id).await;
    assert_eq!((row.state, row.attempt), (JobState::Available, 1));
    assert_eq!(row.errors[0]["error_type"], "rescued_timeout");

    let last = JobFactory::new("conformance.behave")
        .attempts(3, 3)
        .timeout_ms(300)
        .claimed_by("stuck-node")
        .state(JobState::Running, start)
        .insert(&*db.driver)
        .await;
    assert_eq!(rescuer.run_once(&ctx).await.expect("rescue"), vec![last]);
    let row = db.job(last).await;
    assert_eq!((row.state, row.max_attempts), (JobState::Available, 4), "its run may never have started");
    assert!(row.finalized_at.is_none());
}

/// A claim committed whose reply never reached its node: past the grace, the node hands
/// the job back itself; a job it holds, just as old, stays; the job then runs once.
pub async fn a_claim_whose_reply_was_lost_is_handed_back_by_its_own_node(db: TestDb) {
    let ledger = Ledger::new();
    let start = Utc::now();
    let clock = ManualClock::new(start);
    let lost = record::enqueue(&db.driver, ledger.record(7)).await.expect("enqueue").id;
    let claimed = db.driver.job_claim(claim("lossy-node", Some(start))).await.expect("claim");
    assert_eq!(claimed.len(), 1);

    let handle = db
        .worker()
        .node_name("lossy-node")
        .clock(Arc::new(clock.clone()))
        .orphan_grace(Duration::from_secs(30))
        .heartbeat_interval(Duration::from_millis(50))
        .without_maintenance()
        .build()
        .expect("build")
        .start()
        .await
        .expect("start");
    let held = wait_until_cancelled::enqueue(&db.driver, ()).await.expect("enqueue").id;
    // Running in the node, not only in the table: the claim's reply has arrived.
    wait_for("the node to hold the job", DEADLINE, || async { (handle.running() == 1).then_some(()) }).await;

    clock.advance(Duration::from_secs(60));
    // Released in place, the node claims it again at once.
    let done = db.wait_state(lost, JobState::Completed).await;
    assert_eq!(done.errors[0]["error_type"], "rescued_orphaned");
    assert_eq!(done.errors[0]["attempt"], 1, "the attempt was kept, fencing the lost claim");
    assert_eq!(done.attempt, 2);
    let still = db.job(held).await;
    assert_eq!((still.state, still.attempt), (JobState::Running, 1), "a held job is never released");
    assert!(still.errors.as_array().is_some_and(Vec::is_empty));
    assert_eq!(ledger.runs().iter().filter(|r| r.job == lost).count(), 1);
    db.driver.job_cancel_many(JobCancelManyParams { ids: &[held] }).await.expect("cancel");
    db.wait_state(held, JobState::Cancelled).await;
    handle.shutdown().await.expect("shutdown");
}

/// One node holds the lease while it renews; when it stops, another takes over once the
/// lease runs out, and the first learns it lost it.
pub async fn one_leader_at_a_time_and_another_takes_over_when_the_lease_expires(db: TestDb) {
    let clock = ManualClock::new(Utc::now());
    let a = ServiceContext::new(db.driver.clone(), "node-a").with_clock(Arc::new(clock.clone()));
    let b = ServiceContext::new((db.another)(2), "node-b").with_clock(Arc::new(clock.clone()));
    let elector =
        LeaderElector::new(LeaderConfig { ttl: Duration::from_secs(15), ..LeaderConfig::default() });

    assert!(elector.run_once(&a).await.expect("a"));
    assert!(!elector.run_once(&b).await.expect("b"), "the lease is held");
    clock.advance(Duration::from_secs(10));
    assert!(elector.run_once(&a).await.expect("a renews"));
    clock.advance(Duration::from_secs(10));
    assert!(!elector.run_once(&b).await.expect("b"), "renewed 10 s ago for 15 s");
    clock.advance(Duration::from_secs(6));
    assert!(elector.run_once(&b).await.expect("b takes over"));
    assert!(b.is_leader());
    assert!(!elector.run_once(&a).await.expect("a"), "a learns it lost the lease");
    assert!(!a.is_leader());
}

/// A rescued job goes back in its place in line: before the jobs enqueued after it (same
/// priority), behind none of them; no scheduler needed.
pub async fn a_rescued_job_runs_before_jobs_enqueued_after_it(db: TestDb) {
    let ledger = Ledger::new();
    let first = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    let claimed = db.driver.job_claim(claim("ghost-node", None)).await.expect("claim");
    assert_eq!(claimed[0].id, first);
    let later: Vec<i64> = {
        let mut ids = Vec::new();
        for n in 2..=4 {
            ids.push(record::enqueue(&db.driver, ledger.record(n)).await.expect("enqueue").id);
        }
        ids
    };
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer-node");
    assert_eq!(Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue"), vec![first]);
    let next = JobClaimParams { limit: 1, ..claim("survivor", None) };
    let again = db.driver.job_claim(next).await.expect("claim");
    assert_eq!(again[0].id, first, "the rescued job comes before {later:?}");
    assert_eq!(again[0].attempt, 2);
}

/// Leadership follows liveness: when the leader's node stops heartbeating, a standby
/// takes the lease at its next try, long before the lease would run out; while the leader
/// heartbeats, nobody does.
pub async fn a_standby_leads_as_soon_as_the_leaders_node_is_silent(db: TestDb) {
    let start = Utc::now();
    let clock = ManualClock::new(start);
    let a = ServiceContext::new(db.driver.clone(), "node-a").with_clock(Arc::new(clock.clone()));
    let b = ServiceContext::new((db.another)(2), "node-b").with_clock(Arc::new(clock.clone()));
    let config = LeaderConfig {
        ttl: Duration::from_secs(60),
        holder_stale_after: Duration::from_secs(5),
        ..LeaderConfig::default()
    };
    let elector = LeaderElector::new(config);
    heartbeat(&db, "node-a", start).await;
    assert!(elector.run_once(&a).await.expect("a"));
    clock.advance(Duration::from_secs(4));
    heartbeat(&db, "node-a", clock.now()).await;
    assert!(!elector.run_once(&b).await.expect("b"), "a heartbeats: its lease holds");
    clock.advance(Duration::from_secs(6));
    assert!(elector.run_once(&b).await.expect("b"), "a silent for 6 s: b leads, 50 s before the lease ends");
    assert!(!elector.run_once(&a).await.expect("a"), "a learns it lost the lease");
}

/// Nodes silent for the cleanup period are forgotten; live ones stay; their names stay
/// on the attempts of their jobs.
pub async fn dead_nodes_are_forgotten_after_the_cleanup_period(db: TestDb) {
    let start = Utc::now();
    let clock = ManualClock::new(start);
    let ledger = Ledger::new();
    let id = record::enqueue(&db.driver, ledger.record(1)).await.expect("enqueue").id;
    heartbeat(&db, "gone-node", start).await;
    db.driver.job_claim(claim("gone-node", Some(start))).await.expect("claim");
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer-node").with_clock(Arc::new(clock.clone()));
    let rescuer = Rescuer::new(RescuerConfig {
        forget_nodes_after: Duration::from_secs(300),
        ..RescuerConfig::default()
    });
    clock.advance(Duration::from_secs(299));
    heartbeat(&db, "live-node", clock.now()).await;
    assert_eq!(rescuer.run_once(&ctx).await.expect("rescue"), vec![id]);
    let names =
        |nodes: Vec<jobs_core::driver::NodeRow>| nodes.into_iter().map(|n| n.name).collect::<Vec<_>>();
    let nodes = db.driver.node_list(jobs_core::driver::NodeListParams {}).await.expect("nodes");
    assert_eq!(names(nodes), vec!["live-node", "gone-node"], "not forgotten before the period");
    clock.advance(Duration::from_secs(2));
    rescuer.run_once(&ctx).await.expect("rescue");
    let nodes = db.driver.node_list(jobs_core::driver::NodeListParams {}).await.expect("nodes");
    assert_eq!(names(nodes), vec!["live-node"]);
    assert_eq!(db.job(id).await.attempted_by, vec!["gone-node".to_owned()], "its history stays");
}

/// Jobs that would take a uniqueness key another job holds — a rescued job whose duplicate
/// was enqueued while it ran (its key was not unique while running), a retry falling due
/// beside a newer copy, two copies due at once — are discarded with an error entry, the
/// first copy (by priority, due time, id) kept; the rescuer and the scheduler never stall
/// on the unique index, and the other jobs of their batch move on.
pub async fn jobs_whose_uniqueness_key_was_taken_meanwhile_are_discarded_not_stuck(db: TestDb) {
    use JobState::{Available, Discarded, Retryable, Running, Scheduled};
    let now = Utc::now();
    let waiting: &[JobState] = &[Available, Scheduled];
    let ids = crate::factory::insert_all(
        &*db.driver,
        vec![
            // Rescued: its node is gone, and a copy waits.
            JobFactory::new("conformance.record").unique("a", waiting).claimed_by("gone").state(Running, now),
            JobFactory::new("conformance.record").unique("a", waiting).state(Available, now),
            JobFactory::new("conformance.record").claimed_by("gone").state(Running, now),
            // Due: a retry beside a copy that waits.
            JobFactory::new("conformance.record").unique("b", waiting).state(Retryable, now),
            JobFactory::new("conformance.record").unique("b", waiting).state(Available, now),
            // Due together: two retries of one key, and one of no key.
            JobFactory::new("conformance.record").unique("c", waiting).state(Retryable, now),
            JobFactory::new("conformance.record").unique("c", waiting).priority(-1).state(Retryable, now),
            JobFactory::new("conformance.record").state(Retryable, now),
        ],
    )
    .await;
    let ctx = ServiceContext::new(db.driver.clone(), "leader");
    let mut rescued = Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue");
    rescued.sort_unstable();
    assert_eq!(rescued, vec![ids[0], ids[2]]);
    let moved = jobs_core::maintenance::Scheduler::new(SchedulerConfig::default())
        .run_once(&ctx)
        .await
        .expect("schedule");
    let states: Vec<JobState> = {
        let mut states = Vec::new();
        for id in &ids {
            states.push(db.job(*id).await.state);
        }
        states
    };
    assert_eq!(
        states,
        vec![Discarded, Available, Available, Discarded, Available, Discarded, Available, Available],
        "moved {moved}"
    );
    assert_eq!(db.job(ids[0]).await.errors[0]["error_type"], "rescued_node_lost");
    assert_eq!(db.job(ids[3]).await.errors[0]["error_type"], "unique_conflict");
    assert!(db.job(ids[5]).await.finalized_at.is_some());
}
