//! How much of a queue's limits is in use, as the dashboard reads it: the keys running and
//! at their limit, the busiest keys with their waiting jobs, and the rate's starts.

use chrono::Utc;
use jobs_core::driver::{
    ClaimLimits, JobClaimParams, KeyLoad, QueueLimitsUsageParams, QueueSetLimitsParams, RateLimit,
};
use jobs_core::enqueue_many;

use crate::TestDb;
use crate::keyed::{Tallied, export};

fn usage(queue: &str, per_key_limit: Option<i64>, top: usize, cap: i64) -> QueueLimitsUsageParams<'_> {
    QueueLimitsUsageParams { queue, per_key_limit, top, cap }
}

fn load(key: Option<&str>, running: i64, available: Option<i64>) -> KeyLoad {
    KeyLoad { key: key.map(str::to_owned), running, available }
}

/// Key "a" with 5 jobs, "b" with 3, "c" with 1 and 2 unkeyed, at most 2 per key and 100 an
/// hour: a claim starts 7 (2 of a, 2 of b, c, the 2 unkeyed). The usage counts 4 keys
/// running, 3 at their limit; the 3 busiest are the unkeyed group (its waiting jobs not
/// counted), a (3 waiting, counted up to 2) and b (1 waiting); the rate counts 7 starts.
/// A queue nobody claimed from reads as unused.
pub async fn the_limits_usage_reads_running_keys_and_the_rates_starts(db: TestDb) {
    let tally = Tallied::new();
    let keys = [Some("a"); 5].into_iter().chain([Some("b"); 3]).chain([Some("c"), None, None]);
    enqueue_many(&db.driver, keys.map(|k| export::build(tally.export(k, 0)))).await.expect("enqueue");
    let rate = RateLimit { allowed: 100, period_secs: 3600 };
    let limits = QueueSetLimitsParams {
        queue: "exports",
        global_limit: None,
        per_key_limit: Some(2),
        rate: Some(rate),
        per_key_rate: None,
    };
    db.driver.queue_set_limits(limits).await.expect("set");
    let claim = JobClaimParams {
        queue: "exports",
        limit: 20,
        node: "n",
        now: None,
        recurring_size: false,
        limited: true,
        declared: Default::default(),
        ended: &[],
    };
    assert_eq!(db.driver.job_claim(claim).await.expect("claim").len(), 7);

    let used = db.driver.queue_limits_usage(usage("exports", Some(2), 3, 2)).await.expect("usage");
    assert_eq!((used.keys_running, used.keys_at_limit), (4, 3));
    assert_eq!(used.busiest, [load(None, 2, None), load(Some("a"), 2, Some(2)), load(Some("b"), 2, Some(1))]);
    let limits = ClaimLimits::stored(None, None, Some(100), Some(3600), used.rate_window);
    assert_eq!(limits.started(Utc::now()), 7, "the rate's starts as the next claim counts them");

    let all = db.driver.queue_limits_usage(usage("exports", None, 10, 100)).await.expect("usage");
    assert_eq!((all.keys_running, all.keys_at_limit, all.busiest.len()), (4, 0, 4));
    assert_eq!(all.busiest[1], load(Some("a"), 2, Some(3)));
    assert_eq!(all.busiest[3], load(Some("c"), 1, Some(0)));

    let unused = db.driver.queue_limits_usage(usage("elsewhere", Some(2), 3, 2)).await.expect("usage");
    assert_eq!(unused, jobs_core::driver::LimitsUsage::default());
}
