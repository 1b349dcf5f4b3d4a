//! Operators' actions (the dashboard's buttons, the CLI): retry, cancel and delete one
//! job, many jobs, or every job matching a filter in bounded batches.

use chrono::Utc;
use jobs_core::driver::{JobFilter, JobState};
use jobs_core::{Action, JobRow};

use crate::TestDb;
use crate::factory::{JobFactory, insert_all};

/// One job per state, returned in the order of `JobState::ALL`.
async fn one_in_each_state(db: &TestDb, queue: &str) -> Vec<i64> {
    let now = Utc::now();
    let jobs = JobState::ALL
        .iter()
        .map(|s| JobFactory::new("k").queue(queue).attempts(1, 1).state(*s, now))
        .collect();
    insert_all(&*db.driver, jobs).await
}

async fn state_of(db: &TestDb, id: i64) -> Option<JobState> {
    db.driver.job_get(jobs_core::driver::JobGetParams { id }).await.expect("get").map(|j: JobRow| j.state)
}

/// Each action on each state: retry makes any job but a running or a pending one available
/// (granting an attempt to one that used them all; a pending job waits for its
/// dependencies, which a retry does not skip); cancel stops what is not finished, pending
/// included (a running job is told to stop); delete removes any job but a running one.
pub async fn actions_apply_to_one_job_many_jobs_and_every_job_matching_a_filter(db: TestDb) {
    let driver = &*db.driver;
    // One job at a time.
    let ids = one_in_each_state(&db, "one").await;
    let by_state = |s: JobState| ids[JobState::ALL.iter().position(|x| *x == s).expect("a state")];
    assert_eq!(Action::Retry.apply(driver, &[by_state(JobState::Running)]).await.expect("retry").changed, 0);
    assert_eq!(Action::Retry.apply(driver, &[by_state(JobState::Pending)]).await.expect("retry").changed, 0);
    assert_eq!(state_of(&db, by_state(JobState::Pending)).await, Some(JobState::Pending));
    // A pending job is no candidate for a retry, so its key never blocks one: here an
    // available job holds the key, and a discarded one with the same key comes after the
    // pending one in the call. Neither pending job is reported as held, nor blocks the
    // discarded one: the available job and the discarded one are retried.
    let now = Utc::now();
    let keyed = insert_all(
        driver,
        vec![
            JobFactory::new("k")
                .queue("keys")
                .unique("k1", &JobState::DEFAULT_UNIQUE)
                .state(JobState::Pending, now),
            JobFactory::new("k")
                .queue("keys")
                .unique("k2", &JobState::DEFAULT_UNIQUE)
                .state(JobState::Pending, now),
            JobFactory::new("k").queue("keys").unique("k1", &JobState::DEFAULT_UNIQUE),
            JobFactory::new("k")
                .queue("keys")
                .attempts(1, 1)
                .unique("k2", &JobState::DEFAULT_UNIQUE)
                .state(JobState::Discarded, now),
        ],
    )
    .await;
    let applied = Action::Retry.apply(driver, &keyed).await.expect("retry");
    assert_eq!((applied.changed, applied.key_held.clone()), (2, Vec::new()), "{applied:?}");
    assert_eq!(state_of(&db, keyed[3]).await, Some(JobState::Available), "k2 was free: pending holds no key");
    assert_eq!(state_of(&db, keyed[0]).await, Some(JobState::Pending));
    Action::Delete.apply(driver, &keyed).await.expect("clean up");
    assert_eq!(
        Action::Retry.apply(driver, &[by_state(JobState::Discarded)]).await.expect("retry").changed,
        1
    );
    let retried = db.job(by_state(JobState::Discarded)).await;
    assert_eq!((retried.state, retried.max_attempts, retried.finalized_at), (JobState::Available, 2, None));
    assert_eq!(
        Action::Cancel.apply(driver, &[by_state(JobState::Completed)]).await.expect("cancel").changed,
        0
    );
    assert_eq!(
        Action::Cancel.apply(driver, &[by_state(JobState::Scheduled)]).await.expect("cancel").changed,
        1
    );
    assert_eq!(state_of(&db, by_state(JobState::Scheduled)).await, Some(JobState::Cancelled));
    assert_eq!(
        Action::Cancel.apply(driver, &[by_state(JobState::Pending)]).await.expect("cancel").changed,
        1
    );
    assert_eq!(state_of(&db, by_state(JobState::Pending)).await, Some(JobState::Cancelled));
    assert_eq!(
        Action::Cancel.apply(driver, &[by_state(JobState::Running)]).await.expect("cancel").changed,
        1
    );
    let running = db.job(by_state(JobState::Running)).await;
    assert_eq!(running.state, JobState::Running, "a running job is only told to stop");
    assert!(running.cancel_requested_at.is_some());
    assert_eq!(
        Action::Delete.apply(driver, &[by_state(JobState::Running)]).await.expect("delete").changed,
        0
    );
    assert_eq!(
        Action::Delete.apply(driver, &[by_state(JobState::Completed)]).await.expect("delete").changed,
        1
    );
    assert_eq!(state_of(&db, by_state(JobState::Completed)).await, None);
    assert_eq!(Action::Retry.apply(driver, &[i64::MAX]).await.expect("retry a missing job").changed, 0);

    // Many at once: every job of a second set, each action counting what it changed.
    let many = one_in_each_state(&db, "many").await;
    assert_eq!(
        Action::Cancel.apply(driver, &many).await.expect("cancel").changed,
        5,
        "pending, available, scheduled, running, retryable"
    );
    assert_eq!(
        Action::Delete.apply(driver, &many).await.expect("delete").changed,
        7,
        "all but the running one"
    );

    // Every job matching a filter, three per statement: ten discarded jobs of one queue
    // are retried, the rest is left alone.
    let now = Utc::now();
    let mut jobs: Vec<JobFactory> = (0..10)
        .map(|_| JobFactory::new("k").queue("bulk").attempts(1, 1).state(JobState::Discarded, now))
        .collect();
    jobs.push(JobFactory::new("k").queue("bulk").state(JobState::Completed, now));
    jobs.push(JobFactory::new("k").queue("elsewhere").attempts(1, 1).state(JobState::Discarded, now));
    let ids = insert_all(driver, jobs).await;
    let filter =
        JobFilter { states: vec![JobState::Discarded], queue: Some("bulk".into()), ..JobFilter::default() };
    assert_eq!(Action::Retry.apply_to_matching(driver, &filter, 3).await.expect("retry all").changed, 10);
    for id in &ids[..10] {
        assert_eq!(state_of(&db, *id).await, Some(JobState::Available));
    }
    assert_eq!(state_of(&db, ids[10]).await, Some(JobState::Completed));
    assert_eq!(state_of(&db, ids[11]).await, Some(JobState::Discarded));
    let bulk = JobFilter { queue: Some("bulk".into()), ..JobFilter::default() };
    // A confirmation pins the set it showed: jobs enqueued after it are left alone.
    let pin = Action::newest_matching(driver, &bulk).await.expect("pin");
    assert_eq!(pin, ids.iter().copied().filter(|id| *id != ids[11]).max());
    let later =
        insert_all(driver, vec![JobFactory::new("k").queue("bulk"), JobFactory::new("k").queue("bulk")])
            .await;
    assert_eq!(
        Action::Delete.apply_to_matching_through(driver, &bulk, pin, 4).await.expect("delete all").changed,
        11
    );
    for id in &later {
        assert_eq!(state_of(&db, *id).await, Some(JobState::Available), "enqueued after the pin");
    }
    // Left: the first set but its deleted job (7), the second set's running job, the
    // other queue's job, and the two enqueued after the pin.
    assert_eq!(db.count(None).await, 7 + 1 + 1 + 2);
}
