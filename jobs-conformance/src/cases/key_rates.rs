//! A rate limit per partition key: each key's starts per period counted apart, across
//! nodes; a key whose rate is used up holds none of the others back; the unkeyed jobs one
//! group among the keys.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_core::driver::partition::partition_key_of;
use jobs_core::driver::{
    JobClaimParams, JobState, QueueLimitsUsageParams, QueueSetLimitsParams, QueueSettingsParams, RateLimit,
};
use jobs_core::testing::wait_for;
use jobs_core::{QueueConfig, Worker, enqueue_many};

use crate::keyed::{Tallied, export};
use crate::{DEADLINE, TestDb, registry};

fn claim(limit: usize, now: DateTime<Utc>) -> JobClaimParams<'static> {
    JobClaimParams {
        queue: "exports",
        limit,
        node: "node-a",
        now: Some(now),
        recurring_size: false,
        limited: true,
        declared: Default::default(),
        ended: &[],
    }
}

fn rate_per_key(allowed: u32, period_secs: u32, per_key_limit: Option<i32>) -> QueueSetLimitsParams<'static> {
    QueueSetLimitsParams {
        queue: "exports",
        global_limit: None,
        per_key_limit,
        rate: None,
        per_key_rate: Some(RateLimit { allowed, period_secs }),
    }
}

/// The keys claimed, `""` for the unkeyed jobs, with how many each.
fn keys_of(jobs: &[jobs_core::driver::ClaimedJob]) -> Vec<(String, usize)> {
    let mut keys: HashMap<String, usize> = HashMap::new();
    for job in jobs {
        *keys.entry(partition_key_of(&job.meta).unwrap_or_default()).or_default() += 1;
    }
    let mut keys: Vec<(String, usize)> = keys.into_iter().collect();
    keys.sort();
    keys
}

fn n(key: &str, count: usize) -> (String, usize) {
    (key.to_owned(), count)
}

/// 2 a minute per key, counted in slices of 3 s: each key (and the unkeyed group) starts
/// 2, then none until a minute after their slice; a key that comes meanwhile starts its
/// 2 even through a claim of 1, past every key whose rate is used up.
pub async fn a_rate_per_key_slides_over_each_keys_window(db: TestDb) {
    let tally = Tallied::new();
    let keys = [Some("a"); 6].into_iter().chain([Some("b"); 6]).chain([Some("c"); 2]).chain([None; 3]);
    enqueue_many(&db.driver, keys.map(|k| export::build(tally.export(k, 0)))).await.expect("enqueue");
    db.driver.queue_set_limits(rate_per_key(2, 60, None)).await.expect("set");
    let stored =
        db.driver.queue_settings(QueueSettingsParams { queue: Some("exports") }).await.expect("read");
    assert_eq!(stored[0].per_key_rate(), Some(RateLimit { allowed: 2, period_secs: 60 }));
    assert!(stored[0].limited());

    let t0 = Utc::now();
    let at = |s: i64| t0 + chrono::Duration::seconds(s);
    let first = db.driver.job_claim(claim(100, t0)).await.expect("claim");
    assert_eq!(keys_of(&first), [n("", 2), n("a", 2), n("b", 2), n("c", 2)], "2 of each key");
    let usage = QueueLimitsUsageParams { queue: "exports", per_key_limit: None, top: 5, cap: 100 };
    let used = db.driver.queue_limits_usage(usage).await.expect("usage");
    assert_eq!(used.keys_rate_used_up, 4, "every key, and the unkeyed group, used up its rate");
    assert!(db.driver.job_claim(claim(100, at(30))).await.expect("claim").is_empty(), "all used up");

    let late = [Some("z"); 3].into_iter();
    enqueue_many(&db.driver, late.map(|k| export::build(tally.export(k, 0)))).await.expect("enqueue");
    let one = db.driver.job_claim(claim(1, at(30))).await.expect("claim");
    assert_eq!(keys_of(&one), [n("z", 1)], "a claim of 1 walks past the keys that used up their rate");
    let more = db.driver.job_claim(claim(10, at(31))).await.expect("claim");
    assert_eq!(keys_of(&more), [n("z", 1)], "z started its 2");

    // A minute and a slice after t0: the first starts no longer count, z's still do.
    let later = db.driver.job_claim(claim(100, at(63))).await.expect("claim");
    assert_eq!(keys_of(&later), [n("", 1), n("a", 2), n("b", 2)]);
    assert!(db.driver.job_claim(claim(100, at(70))).await.expect("claim").is_empty());
    let last = db.driver.job_claim(claim(100, at(100))).await.expect("claim");
    assert_eq!(keys_of(&last), [n("z", 1)], "z's starts a minute and a slice on");
    assert_eq!(db.count(Some(JobState::Running)).await, 8 + 2 + 5 + 1);
}

/// Three workers of 50 slots on a queue with 4 starts a second per key (declared on each
/// worker's queue, none stored) and 2 running per key (the kind's own limit): every key's
/// starts, as the table records them, never
/// exceed its rate in any stretch of the period, no key runs more than 2 at once, and
/// every job runs once.
pub async fn rates_per_key_hold_across_three_workers(db: TestDb) {
    let tally = Tallied::new();
    let customers: Vec<String> = (0..8).map(|i| format!("customer-{i}")).collect();
    let mut jobs: Vec<_> = Vec::new();
    for k in &customers {
        jobs.extend((0..12).map(|_| export::build(tally.export(Some(k), 5))));
    }
    jobs.extend((0..12).map(|_| export::build(tally.export(None, 5))));
    enqueue_many(&db.driver, jobs).await.expect("enqueue");
    let mut handles = Vec::new();
    for i in 0..3 {
        let queue = QueueConfig::new("exports", 50).per_key_rate_limit(4, Duration::from_secs(1));
        let worker = Worker::builder((db.another)(8))
            .queue_config(queue)
            .node_name(format!("rated-{i}"))
            .registry(registry())
            .poll_interval(Duration::from_millis(50))
            .build()
            .expect("build");
        handles.push(worker.start().await.expect("start"));
    }
    wait_for("the 108 exports to complete", DEADLINE, || async {
        (db.count(Some(JobState::Completed)).await == 108).then_some(())
    })
    .await;
    for handle in handles {
        handle.shutdown().await.expect("shutdown");
    }
    let seen = tally.read();
    assert_eq!(seen.starts.len(), 108, "every job ran once");
    assert!(tally.most_of_one_key() <= 2, "{:?} of one key at once", seen.most_per_key);
    // The claims' times are the rows' `attempted_at` (on MySQL/MariaDB the claim reads its
    // clock a few milliseconds before it writes the rows): a stretch of the period less two
    // slices (100 ms) never holds more than 4 of one key.
    let mut by_key: HashMap<String, Vec<DateTime<Utc>>> = HashMap::new();
    for job in db.all_jobs().await {
        let key = partition_key_of(&job.meta.to_string()).unwrap_or_default();
        by_key.entry(key).or_default().push(job.attempted_at.expect("claimed"));
    }
    assert_eq!(by_key.len(), 9);
    for (key, mut starts) in by_key {
        starts.sort();
        for (i, from) in starts.iter().enumerate() {
            let within =
                starts[i..].iter().take_while(|t| **t - *from < chrono::Duration::milliseconds(900)).count();
            assert!(within <= 4, "{within} of {key:?} started within 900 ms from {from}: {starts:?}");
        }
        // 12 at 4 a second: the last started at least 2 periods after the first.
        let spread = *starts.last().expect("12") - starts[0];
        assert!(spread >= chrono::Duration::milliseconds(1_900), "{key:?}'s 12 starts took {spread}");
    }
}
