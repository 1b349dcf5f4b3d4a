//! Unique jobs: a duplicate returns the existing job while that job is in one of the key's
//! states, and a new one once it has left them.

use jobs_core::driver::{JobClaimParams, JobCompleteManyParams};
use jobs_core::enqueue_many;

use crate::conformance::TestDb;
use crate::conformance::jobs::{Sync, record, sync_account};

/// `unique(fields(account), states(pending))`: duplicates by account, in one batch or
/// across calls, until the job completes; a per-call key makes any kind unique.
pub async fn unique_keys_hold_in_their_states_and_free_up_after(db: TestDb) {
    let first = sync_account::enqueue(&db.driver, Sync { account: 7, full: false }).await.expect("first");
    assert!(!first.existing);
    let again = sync_account::enqueue(&db.driver, Sync { account: 7, full: true }).await.expect("again");
    assert_eq!((again.id, again.existing), (first.id, true), "`fields(account)` ignores the rest");
    let other = sync_account::enqueue(&db.driver, Sync { account: 8, full: false }).await.expect("other");
    assert!(!other.existing);
    assert_ne!(other.id, first.id);

    let batch =
        enqueue_many(&db.driver, [9, 9, 7].map(|account| sync_account::build(Sync { account, full: false })))
            .await
            .expect("batch");
    assert!(!batch[0].existing);
    assert_eq!((batch[1].id, batch[1].existing), (batch[0].id, true), "duplicates in one batch are one job");
    assert_eq!((batch[2].id, batch[2].existing), (first.id, true));
    assert_eq!(db.count(None).await, 3);

    // Still unique while it runs; free once it completed.
    let claim = JobClaimParams {
        queue: "default",
        limit: 10,
        node: "n",
        now: None,
        recurring_size: false,
        limited: false,
    };
    let claimed = db.driver.job_claim(claim).await.expect("claim");
    assert_eq!(claimed.len(), 3);
    let running = sync_account::enqueue(&db.driver, Sync { account: 7, full: false }).await.expect("running");
    assert_eq!((running.id, running.existing), (first.id, true));
    let done = crate::conformance::factory::succeeded(first.id, "default", 1);
    db.driver
        .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
        .await
        .expect("complete");
    let after = sync_account::enqueue(&db.driver, Sync { account: 7, full: false }).await.expect("after");
    assert!(!after.existing);
    assert_ne!(after.id, first.id);

    let ledger = crate::conformance::jobs::Ledger::new();
    let keyed =
        record::build(ledger.record(1)).unique_key("2026-11-22").enqueue(&db.driver).await.expect("keyed");
    let keyed_again =
        record::build(ledger.record(2)).unique_key("2026-11-22").enqueue(&db.driver).await.expect("again");
    assert_eq!((keyed_again.id, keyed_again.existing), (keyed.id, true));
    let unkeyed = record::enqueue(&db.driver, ledger.record(3)).await.expect("unkeyed");
    assert!(!unkeyed.existing);
}
