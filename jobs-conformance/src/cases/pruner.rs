//! The pruner: finished jobs go after their state's retention, and one pass keeps pace
//! with a busy queue.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use jobs_core::ManualClock;
use jobs_core::driver::JobState;
use jobs_core::maintenance::{Pruner, PrunerConfig, ServiceContext};

use crate::TestDb;
use crate::factory::{JobFactory, insert_all};

/// Completed kept a day, discarded a week, cancelled forever: exactly the older ones go,
/// one row per statement here, and a second pass finds nothing.
pub async fn the_pruner_deletes_exactly_what_the_retention_says(db: TestDb) {
    let now = Utc::now();
    let hours = |h: i64| now - chrono::Duration::hours(h);
    let layout = [
        (JobState::Completed, 25),
        (JobState::Completed, 23),
        (JobState::Completed, 48),
        (JobState::Discarded, 25),
        (JobState::Discarded, 200),
        (JobState::Cancelled, 1),
        (JobState::Cancelled, 30),
        (JobState::Available, 0),
    ];
    let ids = insert_all(
        &*db.driver,
        layout.iter().map(|(s, h)| JobFactory::new("k").state(*s, hours(*h))).collect(),
    )
    .await;
    let ctx = ServiceContext::new(db.driver.clone(), "pruner").with_clock(Arc::new(ManualClock::new(now)));
    let pruner = Pruner::new(PrunerConfig {
        completed: Some(Duration::from_secs(24 * 3600)),
        discarded: Some(Duration::from_secs(7 * 24 * 3600)),
        cancelled: None,
        batch: 1,
        ..PrunerConfig::default()
    });
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), 3);
    let left: Vec<i64> = db.all_jobs().await.iter().map(|j| j.id).collect();
    assert_eq!(left, vec![ids[1], ids[3], ids[5], ids[6], ids[7]]);
    assert_eq!(pruner.run_once(&ctx).await.expect("prune"), 0, "nothing more to do");
}

/// 150,000 jobs finished two days ago go in one pass with the defaults (a pass once
/// stopped after 100 batches of 1,000, so a queue finishing more than 1,700 jobs/s
/// outgrew its retention).
pub async fn one_pruner_pass_keeps_pace_with_a_busy_queue(db: TestDb) {
    let finished = 150_000;
    let two_days_ago = Utc::now() - chrono::Duration::days(2);
    let old: Vec<JobFactory> =
        (0..finished).map(|_| JobFactory::new("k").state(JobState::Completed, two_days_ago)).collect();
    insert_all(&*db.driver, old).await;
    let recent = JobFactory::new("k").state(JobState::Completed, Utc::now()).insert(&*db.driver).await;
    let ctx = ServiceContext::new(db.driver.clone(), "pruner");
    assert_eq!(Pruner::new(PrunerConfig::default()).run_once(&ctx).await.expect("prune"), finished);
    let left: Vec<i64> = db.all_jobs().await.iter().map(|j| j.id).collect();
    assert_eq!(left, vec![recent], "only the job inside its retention stays");
}
