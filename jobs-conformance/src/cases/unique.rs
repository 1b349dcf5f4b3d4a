//! Unique jobs: a duplicate returns the existing job while that job is in one of the key's
//! states (without locking it), and a new one once it has left them; outcomes and retries
//! that would take a key another job holds never fail their batch.

use std::time::Duration;

use chrono::Utc;
use jobs_core::driver::{Completion, JobClaimParams, JobCompleteManyParams, JobFilter, JobState};
use jobs_core::{Action, enqueue_many};

use crate::TestDb;
use crate::factory::{JobFactory, insert_all};
use crate::jobs::{Sync, record, sync_account};

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
        declared: Default::default(),
        ended: &[],
    };
    let claimed = db.driver.job_claim(claim).await.expect("claim");
    assert_eq!(claimed.len(), 3);
    let running = sync_account::enqueue(&db.driver, Sync { account: 7, full: false }).await.expect("running");
    assert_eq!((running.id, running.existing), (first.id, true));
    let done = crate::factory::succeeded(first.id, "default", 1);
    db.driver
        .job_complete_many(JobCompleteManyParams { completions: &[done], now: None })
        .await
        .expect("complete");
    let after = sync_account::enqueue(&db.driver, Sync { account: 7, full: false }).await.expect("after");
    assert!(!after.existing);
    assert_ne!(after.id, first.id);

    let ledger = crate::jobs::Ledger::new();
    let keyed =
        record::build(ledger.record(1)).unique_key("2026-11-22").enqueue(&db.driver).await.expect("keyed");
    let keyed_again =
        record::build(ledger.record(2)).unique_key("2026-11-22").enqueue(&db.driver).await.expect("again");
    assert_eq!((keyed_again.id, keyed_again.existing), (keyed.id, true));
    let unkeyed = record::enqueue(&db.driver, ledger.record(3)).await.expect("unkeyed");
    assert!(!unkeyed.existing);
}

/// A duplicate of a running unique job, enqueued in an application's transaction that
/// stays open, returns the running job and locks nothing: the holder's completion applies
/// at once, while the transaction is still open.
pub async fn a_duplicate_enqueue_never_waits_on_its_running_holder(db: TestDb) {
    let holder = sync_account::enqueue(&db.driver, Sync { account: 5, full: false }).await.expect("enqueue");
    let claim = JobClaimParams {
        queue: "default",
        limit: 10,
        node: "n",
        now: None,
        recurring_size: false,
        limited: false,
        declared: Default::default(),
        ended: &[],
    };
    assert_eq!(db.driver.job_claim(claim).await.expect("claim").len(), 1);

    let mut app = db.app_transaction().await;
    let duplicate = sync_account::build(Sync { account: 5, full: true }).to_new_job().expect("job");
    let inserted = app.insert(&[duplicate]).await.expect("enqueue in the transaction");
    assert_eq!((inserted[0].id, inserted[0].existing), (holder.id, true));

    let done = [crate::factory::succeeded(holder.id, "default", 1)];
    let completion = db.driver.job_complete_many(JobCompleteManyParams { completions: &done, now: None });
    let applied = tokio::time::timeout(Duration::from_secs(3), completion)
        .await
        .expect("the holder's completion waits on the open transaction")
        .expect("complete");
    assert_eq!(applied, vec![holder.id]);
    assert_eq!(db.job(holder.id).await.state, JobState::Completed);
    app.commit().await.expect("commit");
    assert_eq!(db.count(None).await, 1, "the duplicate was never inserted");
}

/// A key that is not unique while its job runs can be taken meanwhile by a duplicate.
/// The running job's snooze, hand-back or retry would then take it back: instead it is
/// discarded with a `unique_conflict` entry (the duplicate does the work), and the rest of
/// its batch applies. A retry of a job whose key another job holds, by id or over a
/// filter, leaves that job and reports it; the others are retried.
pub async fn outcomes_and_retries_whose_key_is_now_held_never_fail_their_batch(db: TestDb) {
    use JobState::{Available, Discarded, Retryable, Running, Scheduled};
    let now = Utc::now();
    let waiting: &[JobState] = &[Available, Scheduled, Retryable];
    let keyed = |key: &str| {
        JobFactory::new("conformance.record")
            .args(serde_json::json!({"ledger": 0, "n": 1}))
            .unique(key, waiting)
    };
    let ids = insert_all(
        &*db.driver,
        vec![
            // 0 snoozes, 1 is handed back, 2 fails: each while a copy of its key waits (3, 4, 5).
            keyed("snooze").claimed_by("n").state(Running, now),
            keyed("hand-back").claimed_by("n").state(Running, now),
            keyed("fail").claimed_by("n").state(Running, now),
            keyed("snooze").state(Available, now),
            keyed("hand-back").state(Scheduled, now),
            keyed("fail").state(Available, now),
            // 6: an outcome of the same batch with no key.
            JobFactory::new("conformance.record").claimed_by("n").state(Running, now),
        ],
    )
    .await;
    let outcome = |id: i64, state: JobState, give_back: bool| Completion {
        state,
        give_back_attempt: give_back,
        delay_ms: Some(60_000),
        error: Some(serde_json::json!({"attempt": 1, "error_type": "x", "message": "m"}).to_string()),
        ..crate::factory::succeeded(id, "work", 1)
    };
    let batch = [
        outcome(ids[0], Scheduled, true),
        Completion { delay_ms: None, error: None, ..outcome(ids[1], Available, true) },
        outcome(ids[2], Retryable, false),
        crate::factory::succeeded(ids[6], "work", 1),
    ];
    let mut applied = db
        .driver
        .job_complete_many(JobCompleteManyParams { completions: &batch, now: None })
        .await
        .expect("the batch applies");
    applied.sort_unstable();
    assert_eq!(applied, vec![ids[0], ids[1], ids[2], ids[6]]);
    for (id, asked) in [(ids[0], "scheduled"), (ids[1], "available"), (ids[2], "retryable")] {
        let row = db.job(id).await;
        assert_eq!(row.state, Discarded, "job {id}");
        assert!(row.finalized_at.is_some());
        let last = row.errors.as_array().and_then(|e| e.last()).cloned().unwrap_or_default();
        assert_eq!(last["error_type"], "unique_conflict", "job {id}: {last}");
        assert!(last["message"].as_str().is_some_and(|m| m.ends_with(asked)), "job {id}: {last}");
    }
    assert_eq!(db.job(ids[6]).await.state, JobState::Completed);
    for id in &ids[3..6] {
        assert_ne!(db.job(*id).await.state, Discarded, "the copies stay");
    }
    for id in &ids[..3] {
        assert!(db.job(*id).await.unique_key.is_some(), "job {id} keeps its key: a retry finds it held");
    }

    // Retries: 0 and 2 (discarded) collide with their waiting copies; 7 and 8 share a key
    // and neither is held: the first (by id) is retried, the second left; 9 has no key.
    let more = insert_all(
        &*db.driver,
        vec![
            keyed("pair").attempts(1, 1).state(Discarded, now),
            keyed("pair").attempts(1, 1).state(Discarded, now),
            JobFactory::new("conformance.record").attempts(1, 1).state(Discarded, now),
        ],
    )
    .await;
    let asked = [ids[0], ids[2], more[0], more[1], more[2]];
    let applied = Action::Retry.apply(&*db.driver, &asked).await.expect("the retry goes on");
    assert_eq!(applied.changed, 2);
    let mut held = applied.key_held.clone();
    held.sort_unstable();
    assert_eq!(held, vec![ids[0], ids[2], more[1]]);
    assert_eq!(db.job(more[0]).await.state, Available);
    assert_eq!(db.job(more[2]).await.state, Available);
    assert_eq!(db.job(more[1]).await.state, Discarded);
    // Over a filter, in batches of one: every batch goes on.
    let filter = JobFilter { states: vec![Discarded], ..JobFilter::default() };
    let applied = Action::Retry.apply_to_matching(&*db.driver, &filter, 1).await.expect("retry all");
    assert_eq!(applied.changed, 0);
    assert_eq!(applied.key_held.len(), 4, "each discarded job's key is held: {applied:?}");

    // A success whose key another job took while it ran (running is not one of its unique
    // states, completed is): it completes and gives up its key, and the rest of its batch
    // (a keyless success) completes beside it. A failure whose key is unique once discarded
    // too is discarded and gives its key up.
    let kept: &[JobState] = &[Available, Scheduled, Retryable, JobState::Completed, Discarded];
    let done = |key: &str, state: JobState| {
        JobFactory::new("conformance.record")
            .args(serde_json::json!({"ledger": 0, "n": 1}))
            .unique(key, kept)
            .state(state, now)
    };
    let last = insert_all(
        &*db.driver,
        vec![
            done("done", Running).claimed_by("n"),
            done("done", JobState::Completed),
            JobFactory::new("conformance.record").claimed_by("n").state(Running, now),
            done("failed", Running).claimed_by("n"),
            done("failed", Available),
        ],
    )
    .await;
    let batch = [
        crate::factory::succeeded(last[0], "work", 1),
        crate::factory::succeeded(last[2], "work", 1),
        outcome(last[3], Retryable, false),
    ];
    let mut applied = db
        .driver
        .job_complete_many(JobCompleteManyParams { completions: &batch, now: None })
        .await
        .expect("a success whose key is held never fails its batch");
    applied.sort_unstable();
    assert_eq!(applied, vec![last[0], last[2], last[3]]);
    let runner = db.job(last[0]).await;
    assert_eq!(runner.state, JobState::Completed);
    assert_eq!(runner.unique_key, None, "the success gave its key up");
    assert_eq!(db.job(last[1]).await.unique_key.as_deref(), Some(&b"done"[..]), "the holder keeps it");
    assert_eq!(db.job(last[2]).await.state, JobState::Completed);
    let failed = db.job(last[3]).await;
    assert_eq!((failed.state, failed.unique_key), (Discarded, None), "discarded, its key given up");
    assert_eq!(db.job(last[4]).await.state, Available);
}

/// A rescue or a move of due jobs that ends a job in one of its unique states while
/// another job holds its key (`discarded` or `cancelled` among its unique states): the job
/// gives its key up and the rest goes on; the unique index never fails (and so never
/// stalls) the rescuer or the scheduler.
pub async fn rescues_and_due_moves_that_end_a_job_whose_key_is_held_never_fail(db: TestDb) {
    use JobState::{Available, Cancelled, Discarded, Retryable, Running};
    use jobs_core::driver::{JobRescueStuckParams, JobScheduleDueParams};
    let start = Utc::now() - chrono::Duration::minutes(5);
    let keyed = |key: &str, states: &[JobState], state: JobState| {
        JobFactory::new("conformance.record")
            .args(serde_json::json!({"ledger": 0, "n": 1}))
            .unique(key, states)
            .state(state, start)
    };
    let discards: &[JobState] = &[Available, Discarded];
    let cancels: &[JobState] = &[Available, Cancelled];
    let ids = insert_all(
        &*db.driver,
        vec![
            // 0: its node gone, a copy of its key waiting (1): discarded for its key.
            keyed("lost", discards, Running).claimed_by("gone-node"),
            keyed("lost", discards, Available),
            // 2: its node gone, a cancel requested, a copy waiting (3): cancelled.
            keyed("cancel", cancels, Running).claimed_by("gone-node").cancel_requested(start),
            keyed("cancel", cancels, Available),
            // 4 and 5: one key, both on the gone node, no other holder: 4 goes back, 5 is
            // discarded.
            keyed("pair", discards, Running).claimed_by("gone-node"),
            keyed("pair", discards, Running).claimed_by("gone-node"),
            // 6: a keyless job of the same rescue.
            JobFactory::new("conformance.record").claimed_by("gone-node").state(Running, start),
            // 7 and 8: one key, both on the gone node, a cancel requested for 7: 7 is
            // cancelled and gives the key up to 8, which goes back.
            keyed("cancel-first", cancels, Running).claimed_by("gone-node").cancel_requested(start),
            keyed("cancel-first", cancels, Running).claimed_by("gone-node"),
            // 9 and 10: one key, both cancelled by this rescue: one keeps the key.
            keyed("both-cancelled", cancels, Running).claimed_by("gone-node").cancel_requested(start),
            keyed("both-cancelled", cancels, Running).claimed_by("gone-node").cancel_requested(start),
        ],
    )
    .await;
    let rescue = JobRescueStuckParams {
        node_stale_after: Duration::from_secs(8),
        lock_lost_grace: Duration::from_millis(1_500),
        timeout_grace: Duration::from_secs(5),
        lost_nodes: true,
        lost_nodes_by_lock: true,
        max_node_losses: 5,
        limit: 1_000,
        rescuer: "rescuer",
        now: None,
    };
    let mut rescued = db.driver.job_rescue_stuck(rescue).await.expect("the rescue never fails on a key");
    rescued.sort_unstable();
    assert_eq!(rescued, vec![ids[0], ids[2], ids[4], ids[5], ids[6], ids[7], ids[8], ids[9], ids[10]]);
    let expect = [
        (0, Discarded, None),
        (2, Cancelled, None),
        (4, Available, Some("pair")),
        (5, Discarded, None),
        (7, Cancelled, None),
        (8, Available, Some("cancel-first")),
        (9, Cancelled, Some("both-cancelled")),
        (10, Cancelled, None),
    ];
    for (i, state, key) in expect {
        let row = db.job(ids[i]).await;
        let key = key.map(|k: &str| k.as_bytes().to_vec());
        assert_eq!((row.state, row.unique_key), (state, key), "job {i}");
    }
    assert_eq!(db.job(ids[6]).await.state, Available);
    for i in [1, 3] {
        assert!(db.job(ids[i]).await.unique_key.is_some(), "the holder {i} keeps its key");
    }

    // Due: a retry whose key a waiting copy took meanwhile is discarded and gives it up.
    let due = insert_all(
        &*db.driver,
        vec![keyed("due", discards, Retryable).attempts(1, 3), keyed("due", discards, Available)],
    )
    .await;
    let schedule = JobScheduleDueParams { limit: 1_000, now: None };
    db.driver.job_schedule_due(schedule).await.expect("the move never fails on a key");
    let row = db.job(due[0]).await;
    assert_eq!((row.state, row.unique_key), (Discarded, None));
    assert!(db.job(due[1]).await.unique_key.is_some());

    // Due together: a copy waiting outside its unique states, first in line (its id is
    // lower), and the retry that holds the key: the holder goes, the copy is discarded.
    let retries: &[JobState] = &[Available, Running, Retryable];
    let due = insert_all(
        &*db.driver,
        vec![
            keyed("holder-first", retries, JobState::Scheduled),
            keyed("holder-first", retries, Retryable).attempts(1, 3),
        ],
    )
    .await;
    db.driver.job_schedule_due(schedule).await.expect("the move never fails on a key");
    assert_eq!(db.job(due[0]).await.state, Discarded, "the copy");
    let row = db.job(due[1]).await;
    assert_eq!((row.state, row.unique_key), (Available, Some(b"holder-first".to_vec())), "the holder");
}
