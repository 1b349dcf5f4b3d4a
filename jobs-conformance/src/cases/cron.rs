//! Cron schedules on an injected clock: one job per slot with racing nodes, daylight-saving
//! changes, missed-slot policies, retirement, disabling, run now.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use jobs_core::cron::Periodic;
use jobs_core::driver::{
    Driver, ScheduleFireDueParams, ScheduleGetParams, ScheduleRecordRunParams, ScheduleRow,
    ScheduleSetEnabledParams,
};
use jobs_core::maintenance::{CronConfig, CronEnqueuer, ServiceContext};
use jobs_core::{Clock, ManualClock, MissedPolicy};

use crate::TestDb;
use crate::jobs::tick;

fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, min, 0).single().expect("valid time")
}

fn node(driver: Arc<dyn Driver>, name: &str, clock: &ManualClock) -> ServiceContext {
    ServiceContext::new(driver, name).with_clock(Arc::new(clock.clone()))
}

/// Three nodes, each with a driver of its own.
fn three_nodes(db: &TestDb, clock: &ManualClock) -> [ServiceContext; 3] {
    ["node-a", "node-b", "node-c"].map(|n| node((db.another)(3), n, clock))
}

/// The slots fired for `schedule`, from the jobs' metadata, in order.
async fn fired_slots(db: &TestDb, schedule: &str) -> Vec<DateTime<Utc>> {
    let mut slots: Vec<DateTime<Utc>> = db
        .all_jobs()
        .await
        .iter()
        .filter(|r| r.meta["cron"] == schedule && r.meta.get("slot").is_some())
        .map(|r| serde_json::from_value(r.meta["slot"].clone()).expect("slot in meta"))
        .collect();
    slots.sort();
    slots
}

async fn schedule(db: &TestDb, name: &str) -> ScheduleRow {
    db.driver.schedule_get(ScheduleGetParams { name }).await.expect("get").expect("the schedule exists")
}

/// Steps the clock to `end` by `step`, three nodes running a pass concurrently each step.
async fn simulate(
    enqueuers: &[CronEnqueuer; 3],
    ctxs: &[ServiceContext; 3],
    clock: &ManualClock,
    end: DateTime<Utc>,
    step: Duration,
) {
    loop {
        let (a, b, c) = tokio::join!(
            enqueuers[0].run_once(&ctxs[0]),
            enqueuers[1].run_once(&ctxs[1]),
            enqueuers[2].run_once(&ctxs[2]),
        );
        a.expect("node a");
        b.expect("node b");
        c.expect("node c");
        if clock.now() >= end {
            return;
        }
        clock.advance(step);
    }
}

/// Over a simulated day, three nodes racing every minute fire each 5-minute slot and each
/// hourly slot once, and the schedule records its last and next run.
pub async fn three_racing_nodes_fire_every_cron_slot_exactly_once(db: TestDb) {
    let start = utc(2026, 11, 21, 23, 58);
    let clock = ManualClock::new(start);
    let schedules = [
        Periodic::new::<tick>("every-5-minutes", "*/5 * * * *", "five".to_owned()),
        Periodic::new::<tick>("hourly-paris", "0 * * * *", "hour".to_owned()).timezone("Europe/Paris"),
    ];
    let enqueuers = [0, 1, 2].map(|_| CronEnqueuer::new(CronConfig::default(), &schedules).expect("valid"));
    let ctxs = three_nodes(&db, &clock);
    simulate(&enqueuers, &ctxs, &clock, utc(2026, 11, 22, 23, 59), Duration::from_secs(60)).await;

    let five = fired_slots(&db, "every-5-minutes").await;
    let expected: Vec<DateTime<Utc>> =
        (0..288).map(|i| utc(2026, 11, 22, 0, 0) + chrono::Duration::minutes(5 * i)).collect();
    assert_eq!(five, expected, "every 5-minute slot of the day, once");
    let hourly = fired_slots(&db, "hourly-paris").await;
    assert_eq!(hourly.len(), 24);
    assert!(hourly.windows(2).all(|w| w[1] - w[0] == chrono::Duration::hours(1)));

    let row = schedule(&db, "every-5-minutes").await;
    assert_eq!(row.last_run_at, Some(utc(2026, 11, 22, 23, 55)));
    assert_eq!(row.next_run_at, Some(utc(2026, 11, 23, 0, 0)));
    let job = db.job(row.last_job_id.expect("the last job")).await;
    assert_eq!(
        (job.kind.as_str(), job.queue.as_str(), job.max_attempts),
        ("conformance.tick", "periodic", 2)
    );
    assert_eq!(job.args, serde_json::json!("five"));
}

/// A daily 02:30 job in Paris runs once on the day 02:30 does not exist and once on the day
/// it happens twice; an hourly job follows real hours (23 and 25 on those days).
pub async fn daylight_saving_changes_neither_skip_nor_double_a_slot(db: TestDb) {
    let schedules = [
        Periodic::new::<tick>("daily-0230-paris", "30 2 * * *", "daily".to_owned()).timezone("Europe/Paris"),
        Periodic::new::<tick>("hourly-paris", "0 * * * *", "hourly".to_owned()).timezone("Europe/Paris"),
    ];
    let enqueuers = [0, 1, 2].map(|_| CronEnqueuer::new(CronConfig::default(), &schedules).expect("valid"));
    for (from, to) in [
        (utc(2026, 3, 28, 12, 0), utc(2026, 3, 30, 12, 0)),
        (utc(2026, 10, 24, 12, 0), utc(2026, 10, 26, 12, 0)),
    ] {
        let clock = ManualClock::new(from);
        let ctxs = three_nodes(&db, &clock);
        simulate(&enqueuers, &ctxs, &clock, to, Duration::from_secs(300)).await;
    }
    let daily = fired_slots(&db, "daily-0230-paris").await;
    assert_eq!(
        daily,
        vec![
            utc(2026, 3, 29, 1, 30), // 02:30 did not exist: 03:30 CEST, once
            utc(2026, 3, 30, 0, 30),
            utc(2026, 10, 25, 0, 30), // 02:30 happened twice: the first (CEST) only
            utc(2026, 10, 26, 1, 30),
        ]
    );
    let hourly = fired_slots(&db, "hourly-paris").await;
    let on_paris_day = |y, m, d| {
        let day = chrono::NaiveDate::from_ymd_opt(y, m, d).expect("date");
        hourly.iter().filter(|t| t.with_timezone(&chrono_tz::Europe::Paris).date_naive() == day).count()
    };
    assert_eq!(on_paris_day(2026, 3, 29), 23);
    assert_eq!(on_paris_day(2026, 10, 25), 25);
    let gaps: Vec<_> =
        hourly.windows(2).map(|w| w[1] - w[0]).filter(|d| *d != chrono::Duration::hours(1)).collect();
    assert_eq!(gaps.len(), 1, "one gap, between the two simulated windows: {gaps:?}");
}

/// After downtime, `skip` fires nothing and `run_latest` the latest slot once; a slot
/// whose job exists is never enqueued again, even if a stale decision fires it.
pub async fn missed_slots_are_skipped_or_the_latest_runs_once(db: TestDb) {
    let clock = ManualClock::new(utc(2026, 11, 22, 9, 59));
    let enqueuer = CronEnqueuer::new(
        CronConfig::default(),
        &[
            Periodic::new::<tick>("hourly-skip", "0 * * * *", "skip".to_owned()),
            Periodic::new::<tick>("hourly-latest", "0 * * * *", "latest".to_owned())
                .missed(MissedPolicy::RunLatest),
        ],
    )
    .expect("valid");
    let ctx = node(db.driver.clone(), "node-a", &clock);
    assert!(
        enqueuer.run_once(&ctx).await.expect("first pass").is_empty(),
        "a new schedule starts at its next slot"
    );
    clock.set(utc(2026, 11, 22, 10, 0));
    assert_eq!(enqueuer.run_once(&ctx).await.expect("pass").len(), 2, "both fire on time");

    // A node that decides from a stale row fires 10:00 again: the slot's key holds.
    let stale =
        ScheduleRow { next_run_at: Some(utc(2026, 11, 22, 10, 0)), ..schedule(&db, "hourly-skip").await };
    let again = enqueuer.decide(&stale, utc(2026, 11, 22, 10, 0));
    let decide = move |_: &ScheduleRow| again.clone();
    let params = ScheduleFireDueParams { now: Some(utc(2026, 11, 22, 11, 0)), decide: &decide };
    assert!(
        db.driver.schedule_fire_due(params).await.expect("fire").is_empty(),
        "the slot's job already exists"
    );
    assert_eq!(fired_slots(&db, "hourly-skip").await, vec![utc(2026, 11, 22, 10, 0)]);

    // Every node is down from 10:00:30 to 15:20: slots 11:00..15:00 are missed.
    clock.set(utc(2026, 11, 22, 15, 20));
    let fired = enqueuer.run_once(&ctx).await.expect("pass after downtime");
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!((fired[0].schedule.as_str(), fired[0].slot), ("hourly-latest", utc(2026, 11, 22, 15, 0)));
    assert!(enqueuer.run_once(&ctx).await.expect("again").is_empty(), "the latest slot runs once");

    clock.set(utc(2026, 11, 22, 16, 0));
    assert_eq!(enqueuer.run_once(&ctx).await.expect("pass").len(), 2);
    assert_eq!(
        fired_slots(&db, "hourly-skip").await,
        vec![utc(2026, 11, 22, 10, 0), utc(2026, 11, 22, 16, 0)]
    );
    assert_eq!(
        fired_slots(&db, "hourly-latest").await,
        vec![utc(2026, 11, 22, 10, 0), utc(2026, 11, 22, 15, 0), utc(2026, 11, 22, 16, 0)]
    );
}

/// A schedule no longer declared is kept, inactive, and does not fire; a disabled one does
/// not fire and resumes without a backlog; "run now" enqueues at once.
pub async fn schedules_are_retired_disabled_and_run_on_demand(db: TestDb) {
    let clock = ManualClock::new(utc(2026, 11, 22, 9, 59));
    let ctx = node(db.driver.clone(), "node-a", &clock);
    let both = [
        Periodic::new::<tick>("kept", "0 * * * *", "kept".to_owned()),
        Periodic::new::<tick>("removed", "0 * * * *", "removed".to_owned()),
    ];
    CronEnqueuer::new(CronConfig::default(), &both).expect("valid").run_once(&ctx).await.expect("pass");

    let deployed = CronEnqueuer::new(CronConfig::default(), &both[..1]).expect("valid");
    deployed.run_once(&ctx).await.expect("pass");
    assert!(!schedule(&db, "removed").await.active);
    clock.set(utc(2026, 11, 22, 10, 0));
    let fired = deployed.run_once(&ctx).await.expect("pass");
    assert_eq!(fired.iter().map(|f| f.schedule.as_str()).collect::<Vec<_>>(), ["kept"]);

    let enable = |enabled| ScheduleSetEnabledParams { name: "kept", enabled };
    assert!(db.driver.schedule_set_enabled(enable(false)).await.expect("disable"));
    clock.set(utc(2026, 11, 22, 11, 0));
    assert!(deployed.run_once(&ctx).await.expect("pass").is_empty());
    assert!(db.driver.schedule_set_enabled(enable(true)).await.expect("enable"));
    clock.set(utc(2026, 11, 22, 11, 30));
    assert!(deployed.run_once(&ctx).await.expect("pass").is_empty(), "no backlog after re-enabling");
    clock.set(utc(2026, 11, 22, 12, 0));
    assert_eq!(deployed.run_once(&ctx).await.expect("pass").len(), 1);
    let missing = ScheduleSetEnabledParams { name: "nope", enabled: true };
    assert!(!db.driver.schedule_set_enabled(missing).await.expect("unknown"));

    let enqueued = jobs_core::cron::run_now(&*db.driver, "kept").await.expect("run now").expect("exists");
    assert_eq!(db.job(enqueued.id).await.meta, serde_json::json!({"cron": "kept", "run_now": true}));
    // Recorded as the schedule's last run; its next slot is where it was.
    let after = schedule(&db, "kept").await;
    assert_eq!(after.last_job_id, Some(enqueued.id));
    assert_eq!(after.next_run_at, Some(utc(2026, 11, 22, 13, 0)), "run now does not move the next slot");
    let missing = ScheduleRecordRunParams { name: "nope", job_id: enqueued.id, now: None };
    assert!(!db.driver.schedule_record_run(missing).await.expect("unknown"));
    assert!(jobs_core::cron::run_now(&*db.driver, "nope").await.expect("run now").is_none());
}
