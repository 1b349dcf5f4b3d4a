//! Limits per partition key: at most N of a queue's jobs running per key, across nodes,
//! keys served in turn so that one busy key holds none of the others back; unkeyed jobs
//! one group among the keys; a rescued job's place freed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jobs_core::driver::partition::partition_key_of;
use jobs_core::driver::{
    Completion, JobClaimParams, JobCompleteManyParams, JobFilter, JobListParams, JobState, NodeListParams,
    QueueSetLimitsParams, QueueSettingsParams,
};
use jobs_core::maintenance::{Rescuer, RescuerConfig, ServiceContext};
use jobs_core::{QueueConfig, QueueLimits, Worker, enqueue_many, set_queue_limits};

use crate::keyed::{Tallied, export};
use crate::{DEADLINE, TestDb, registry};
use jobs_core::testing::wait_for;

fn claim(limit: usize, node: &str) -> JobClaimParams<'_> {
    JobClaimParams {
        queue: "exports",
        limit,
        node,
        now: None,
        recurring_size: false,
        limited: true,
        declared: Default::default(),
        ended: &[],
    }
}

fn per_key(limit: Option<i32>, global_limit: Option<i32>) -> QueueSetLimitsParams<'static> {
    QueueSetLimitsParams {
        queue: "exports",
        global_limit,
        per_key_limit: limit,
        rate: None,
        per_key_rate: None,
    }
}

fn keys_of(jobs: &[jobs_core::driver::ClaimedJob]) -> Vec<Option<String>> {
    let mut keys: Vec<Option<String>> = jobs.iter().map(|j| partition_key_of(&j.meta)).collect();
    keys.sort();
    keys
}

async fn complete(db: &TestDb, jobs: &[jobs_core::driver::ClaimedJob]) {
    let done: Vec<Completion> =
        jobs.iter().map(|j| crate::factory::succeeded(j.id, "exports", j.attempt)).collect();
    db.driver
        .job_complete_many(JobCompleteManyParams { completions: &done, now: None })
        .await
        .expect("complete");
}

fn key(k: &str) -> Option<String> {
    Some(k.to_owned())
}

/// A busy key enqueued first, three quiet ones, and three unkeyed jobs, 1 per key: a claim
/// takes one of each (the unkeyed jobs are one group), none while they run, and later
/// claims go on round the keys from where the last one stopped (each key still has jobs:
/// starting from the first key again would serve the same ones).
pub async fn per_key_claims_take_the_keys_in_turn(db: TestDb) {
    let tally = Tallied::new();
    let mut jobs: Vec<_> = (0..20).map(|_| export::build(tally.export(Some("hot"), 0))).collect();
    for k in ["b", "c", "d"] {
        jobs.extend((0..3).map(|_| export::build(tally.export(Some(k), 0))));
    }
    jobs.extend((0..3).map(|_| export::build(tally.export(None, 0))));
    enqueue_many(&db.driver, jobs).await.expect("enqueue");
    db.driver.queue_set_limits(per_key(Some(1), None)).await.expect("set");
    let stored =
        db.driver.queue_settings(QueueSettingsParams { queue: Some("exports") }).await.expect("read");
    assert_eq!((stored[0].per_key_limit, stored[0].limited()), (Some(1), true));

    let first = db.driver.job_claim(claim(10, "n")).await.expect("claim");
    assert_eq!(keys_of(&first), [None, key("b"), key("c"), key("d"), key("hot")], "one of each key");
    assert!(db.driver.job_claim(claim(10, "n")).await.expect("claim").is_empty(), "every key at its limit");
    complete(&db, &first).await;

    // Two at a time, in key order from where the turn stopped (after "hot": the round
    // starts again with the unkeyed group).
    let mut turns = Vec::new();
    for _ in 0..3 {
        let jobs = db.driver.job_claim(claim(2, "n")).await.expect("claim");
        turns.push(keys_of(&jobs));
        complete(&db, &jobs).await;
    }
    assert_eq!(turns, [vec![None, key("b")], vec![key("c"), key("d")], vec![None, key("hot")]]);
}

/// 1 per key, one job claimed at a time: a round ends at the greatest key waiting when it
/// began, so keys that arrive after the turn wait for the next round instead of keeping
/// the keys before the turn waiting for ever.
pub async fn new_keys_wait_for_the_next_round(db: TestDb) {
    let tally = Tallied::new();
    let enqueue = async |keys: &[&str]| {
        let jobs = keys.iter().map(|k| export::build(tally.export(Some(k), 0)));
        enqueue_many(&db.driver, jobs).await.expect("enqueue");
    };
    enqueue(&["a", "a", "m"]).await;
    db.driver.queue_set_limits(per_key(Some(1), None)).await.expect("set");
    let mut turns = Vec::new();
    for arriving in [&["z"][..], &["zz"][..], &[][..], &[][..]] {
        let jobs = db.driver.job_claim(claim(1, "n")).await.expect("claim");
        turns.push(keys_of(&jobs));
        complete(&db, &jobs).await;
        enqueue(arriving).await;
    }
    // a, then m (the round's end); z and zz came meanwhile: the next round starts with a.
    assert_eq!(turns, [vec![key("a")], vec![key("m")], vec![key("a")], vec![key("z")]]);
}

/// Three workers of 50 slots on one queue, at most 3 per key and 40 in all (stored, in
/// place of the kind's 2): a busy key enqueued first with 200 jobs, 40 quiet keys with 5
/// each, 10 unkeyed jobs. Sampled all along, in the table and in the jobs: never more than
/// 3 of a key or 40 in all run; the quiet keys are all served long before the busy key is
/// done; every job runs once. (A row whose run has ended reads `running` until its outcome
/// is written, but no longer counts: the sampler leaves out the runs the tally saw end
/// by the time it had read the table.)
pub async fn per_key_limits_hold_across_three_workers(db: TestDb) {
    let tally = Tallied::new();
    let mut jobs: Vec<_> = (0..200).map(|_| export::build(tally.export(Some("hot"), 5))).collect();
    let quiet: Vec<String> = (0..40).map(|i| format!("customer-{i:02}")).collect();
    for k in &quiet {
        jobs.extend((0..5).map(|_| export::build(tally.export(Some(k), 5))));
    }
    jobs.extend((0..10).map(|_| export::build(tally.export(None, 5))));
    enqueue_many(&db.driver, jobs).await.expect("enqueue");
    db.driver.queue_set_limits(per_key(Some(3), Some(40))).await.expect("set");

    // The table, sampled until the last job completes.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (driver, done, tally) = (db.driver.clone(), done.clone(), tally.clone());
        tokio::spawn(async move {
            let filter = JobFilter {
                states: vec![JobState::Running],
                queue: Some("exports".into()),
                ..JobFilter::default()
            };
            let mut samples = 0_u32;
            while !done.load(Ordering::Acquire) {
                let running =
                    driver.job_list(JobListParams { filter: &filter, before: None, limit: 1_000 }).await;
                let mut running = running.expect("list");
                // Read after the table: a run that ended meanwhile, whose room a claim may
                // already have taken, is left out too (so a count over the limit is one).
                let ended = tally.read().ended;
                running.retain(|job| !ended.contains(&job.id));
                let mut per_key: HashMap<Option<String>, usize> = HashMap::new();
                for job in &running {
                    *per_key.entry(partition_key_of(&job.meta.to_string())).or_default() += 1;
                }
                assert!(
                    running.len() <= 40,
                    "{} running in the table, over the global limit 40",
                    running.len()
                );
                if let Some((k, n)) = per_key.iter().find(|(_, n)| **n > 3) {
                    panic!("{n} of key {k:?} running in the table, over the per-key limit 3");
                }
                samples += 1;
                tokio::task::yield_now().await;
            }
            samples
        })
    };
    let mut handles = Vec::new();
    for i in 0..3 {
        let worker = Worker::builder((db.another)(8))
            .queue_config(QueueConfig::new("exports", 50))
            .node_name(format!("keyed-{i}"))
            .registry(registry())
            .poll_interval(Duration::from_millis(100))
            .build()
            .expect("build");
        handles.push(worker.start().await.expect("start"));
    }
    wait_for("the 410 exports to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 410).then_some(())
    })
    .await;
    done.store(true, Ordering::Release);
    let samples = sampler.await.expect("the sampler held");
    for handle in handles {
        handle.shutdown().await.expect("shutdown");
    }
    assert!(samples >= 5, "the table was sampled {samples} times");
    let seen = tally.read();
    assert_eq!(seen.starts.len(), 410, "every job ran once");
    assert!(tally.most_of_one_key() <= 3, "{:?} of one key at once", seen.most_per_key);
    assert!((4..=40).contains(&seen.most_total), "{} at once in all", seen.most_total);
    // Fair: by the last quiet key's last start, the busy key has had few turns.
    let last_quiet = seen.starts.iter().rposition(|k| k != "hot" && !k.is_empty()).expect("quiet runs");
    let hot_before = seen.starts[..last_quiet].iter().filter(|k| *k == "hot").count();
    assert!(
        hot_before <= 100,
        "the busy key started {hot_before} of its 200 before the quiet keys were done"
    );
}

/// The kind's `limit = 2, partition_by = "customer"`: a worker of 10 slots runs 2 of one
/// customer's exports at once, no more, and publishes the limit in its heartbeat; a limit
/// stored for the queue takes its place.
pub async fn a_kinds_declared_limit_applies_to_its_queue(db: TestDb) {
    let tally = Tallied::new();
    enqueue_many(&db.driver, (0..6).map(|_| export::build(tally.export(Some("acme"), 60))))
        .await
        .expect("enqueue");
    let worker = Worker::builder((db.another)(4))
        .queue("exports", 10)
        .registry(registry())
        .poll_interval(Duration::from_millis(100))
        .build()
        .expect("build");
    let handle = worker.start().await.expect("start");
    wait_for("the 6 exports to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 6).then_some(())
    })
    .await;
    assert_eq!(tally.most_of_one_key(), 2, "the kind's limit, reached and held");
    // Published for the dashboard, which reads only stored limits from the database.
    wait_for("the node to publish its declared limit", DEADLINE, || async {
        let nodes = db.driver.node_list(NodeListParams {}).await.expect("nodes");
        nodes.iter().any(|n| n.queues["exports"]["declared"]["per_key_limit"] == 2).then_some(())
    })
    .await;

    let tally = Tallied::new();
    let one = QueueLimits { per_key_limit: Some(1), ..QueueLimits::default() };
    set_queue_limits(&db.driver, "exports", one).await.expect("set");
    assert!(
        set_queue_limits(
            &db.driver,
            "exports",
            QueueLimits { per_key_limit: Some(0), ..QueueLimits::default() }
        )
        .await
        .is_err(),
        "a per-key limit of 0 is refused"
    );
    // The running worker's claims read the stored limit under the queue's lock: at once.
    enqueue_many(&db.driver, (0..4).map(|_| export::build(tally.export(Some("acme"), 30))))
        .await
        .expect("enqueue");
    wait_for("the 4 exports to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 10).then_some(())
    })
    .await;
    handle.shutdown().await.expect("shutdown");
    assert_eq!(tally.most_of_one_key(), 1, "the stored limit in place of the kind's");
}

/// 1 per key: a node claims key `a`'s first job and dies; no one else may run `a` until
/// the rescuer takes the job back, and then one may.
pub async fn a_rescued_job_frees_its_keys_place(db: TestDb) {
    let tally = Tallied::new();
    enqueue_many(&db.driver, (0..2).map(|_| export::build(tally.export(Some("a"), 0))))
        .await
        .expect("enqueue");
    db.driver.queue_set_limits(per_key(Some(1), None)).await.expect("set");
    let lost = db.driver.job_claim(claim(10, "ghost-node")).await.expect("claim");
    assert_eq!(lost.len(), 1);
    assert!(db.driver.job_claim(claim(10, "alive")).await.expect("claim").is_empty(), "a at its limit");
    let ctx = ServiceContext::new(db.driver.clone(), "rescuer-node");
    let rescued = Rescuer::new(RescuerConfig::default()).run_once(&ctx).await.expect("rescue");
    assert_eq!(rescued, vec![lost[0].id]);
    let again = db.driver.job_claim(claim(10, "alive")).await.expect("claim");
    assert_eq!(keys_of(&again), [key("a")], "the rescued job's place is free: one of a runs");
    let ids: HashSet<i64> = again.iter().map(|j| j.id).collect();
    assert_eq!(ids.len(), 1);
}

/// Runs that ended on the claiming node and wait for their outcome's write run nothing:
/// a claim that lists them ([`JobClaimParams::ended`]) takes their room at once, per key
/// and in all; listed at another attempt (not the row's run) or not listed, they count.
pub async fn ended_runs_leave_their_room(db: TestDb) {
    let tally = Tallied::new();
    let keys = ["a", "b", "a", "b", "a", "b"];
    enqueue_many(&db.driver, keys.map(|k| export::build(tally.export(Some(k), 0)))).await.expect("enqueue");
    db.driver.queue_set_limits(per_key(Some(1), Some(2))).await.expect("set");
    fn limited(ended: &[(i64, i32)]) -> JobClaimParams<'_> {
        JobClaimParams { ended, ..claim(10, "n") }
    }
    let runs =
        |jobs: &[jobs_core::driver::ClaimedJob]| jobs.iter().map(|j| (j.id, j.attempt)).collect::<Vec<_>>();

    let first = db.driver.job_claim(limited(&[])).await.expect("claim");
    assert_eq!(keys_of(&first), [key("a"), key("b")]);
    assert!(db.driver.job_claim(limited(&[])).await.expect("claim").is_empty(), "at the limits");
    let other_attempt: Vec<(i64, i32)> = first.iter().map(|j| (j.id, j.attempt + 1)).collect();
    let none = db.driver.job_claim(limited(&other_attempt)).await.expect("claim");
    assert!(none.is_empty(), "a run at another attempt is not the row's: {none:?}");

    let ended = runs(&first);
    let second = db.driver.job_claim(limited(&ended)).await.expect("claim");
    assert_eq!(keys_of(&second), [key("a"), key("b")], "the ended runs' room, taken at once");
    // The first two and the second "a" ended: only the second "b" runs.
    let mut ended = runs(&first);
    let second_a = second.iter().filter(|j| partition_key_of(&j.meta).as_deref() == Some("a"));
    ended.extend(second_a.map(|j| (j.id, j.attempt)));
    let third = db.driver.job_claim(limited(&ended)).await.expect("claim");
    assert_eq!(keys_of(&third), [key("a")], "b is at its limit, a is not");

    // Without the per-key limit: 2 in all, of which the second "b" and the third run.
    db.driver.queue_set_limits(per_key(None, Some(2))).await.expect("set");
    assert!(db.driver.job_claim(limited(&ended)).await.expect("claim").is_empty(), "2 run");
    ended.extend(runs(&third));
    let fourth = db.driver.job_claim(limited(&ended)).await.expect("claim");
    assert_eq!(fourth.len(), 1, "the third's room, in all");
}
