//! Cron schedules outside the conformance suite (whose cases fire slots on every
//! backend): invalid expressions fail at start-up naming the schedule, and a schedule
//! declared on the `#[job]` attribute is declared by the worker.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use jobs_core::cron::Periodic;
use jobs_core::driver::ScheduleGetParams;
use jobs_core::maintenance::{CronConfig, CronEnqueuer, ServiceContext};
use jobs_core::testing::TestDatabase;
use jobs_core::{Error, JobContext, ManualClock, Registry, Worker, job};

#[job(kind = "cron.tick", queue = "periodic", max_attempts = 2)]
async fn tick(_ctx: JobContext, label: String) -> Result<String, std::io::Error> {
    Ok(label)
}

#[job(kind = "cron.nightly", cron = "0 4 * * *", cron_tz = "Europe/Paris", cron_missed = "run_latest")]
async fn nightly(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, min, 0).single().expect("valid time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_expression_or_zone_fails_at_startup_naming_the_schedule() {
    let bad = Periodic::new::<tick>("reports", "61 * * * *", "x".to_owned());
    match CronEnqueuer::new(CronConfig::default(), std::slice::from_ref(&bad)) {
        Err(Error::InvalidSchedule { schedule, reason }) => {
            assert_eq!(schedule, "reports");
            assert!(reason.contains("invalid cron expression"), "{reason}");
        }
        other => panic!("expected InvalidSchedule, got {other:?}"),
    }
    let zone = Periodic::new::<tick>("mars", "* * * * *", "x".to_owned()).timezone("Mars/Olympus");
    let err = CronEnqueuer::new(CronConfig::default(), &[zone]).expect_err("bad zone");
    assert_eq!(
        err.to_string(),
        "cron schedule `mars`: unknown time zone `Mars/Olympus`; use an IANA name such as \"Europe/Paris\""
    );

    // The worker refuses to build with it.
    let db = TestDatabase::new().await.expect("test database");
    let err = Worker::builder(db.pool(2).expect("pool"))
        .queue("periodic", 1)
        .schedule(bad)
        .build()
        .expect_err("bad");
    assert!(matches!(err, Error::InvalidSchedule { ref schedule, .. } if schedule == "reports"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_on_the_attribute_is_declared_by_the_worker() {
    let registry = Registry::from_inventory().expect("registry");
    let schedules: Vec<Periodic> = registry.descriptors().filter_map(Periodic::from_descriptor).collect();
    assert_eq!(schedules.iter().map(Periodic::name).collect::<Vec<_>>(), ["cron.nightly"]);

    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
    let clock = ManualClock::new(utc(2026, 11, 22, 2, 0));
    let enqueuer = CronEnqueuer::new(CronConfig::default(), &schedules).expect("valid");
    let ctx = ServiceContext::new(pool.clone(), "node-a").with_clock(Arc::new(clock));
    enqueuer.run_once(&ctx).await.expect("pass");
    let row =
        ctx.driver.schedule_get(ScheduleGetParams { name: "cron.nightly" }).await.expect("get").expect("row");
    assert_eq!(
        (row.expression.as_str(), row.timezone.as_str(), row.missed_policy.as_str()),
        ("0 0 4 * * *", "Europe/Paris", "run_latest")
    );
    assert_eq!(row.next_run_at, Some(utc(2026, 11, 22, 3, 0)), "04:00 in Paris is 03:00 UTC in November");
}
