//! Cron schedules on an injected clock: exactly one job per slot with racing nodes,
//! daylight-saving changes, missed-slot policies, bad expressions, and management.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use jobs_core::cron::Periodic;
use jobs_core::db::jobs::JobRow;
use jobs_core::maintenance::{CronConfig, CronEnqueuer, ServiceContext};
use jobs_core::schema::jobs;
use jobs_core::testing::TestDatabase;
use jobs_core::{Clock, Error, JobContext, ManualClock, MissedPolicy, Pool, Registry, Worker, job};

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

fn node(pool: &Pool, name: &str, clock: &ManualClock) -> ServiceContext {
    ServiceContext::new(pool.clone(), name).with_clock(Arc::new(clock.clone()))
}

/// The slots fired for `schedule`, from the jobs' metadata, in order.
async fn fired_slots(pool: &Pool, schedule: &str) -> Vec<DateTime<Utc>> {
    let mut conn = pool.get().await.expect("conn");
    let rows: Vec<JobRow> =
        jobs::table.select(JobRow::as_select()).order(jobs::id).load(&mut conn).await.expect("jobs");
    let mut slots: Vec<DateTime<Utc>> = rows
        .iter()
        .filter(|r| r.meta["cron"] == schedule)
        .map(|r| serde_json::from_value(r.meta["slot"].clone()).expect("slot in meta"))
        .collect();
    slots.sort();
    slots
}

/// Steps the clock from `start` to `end` by `step`, with three nodes running a pass
/// concurrently at every step.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_simulated_day_three_racing_nodes_fire_every_slot_exactly_once() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let start = utc(2026, 11, 21, 23, 58);
    let clock = ManualClock::new(start);
    let schedules = [
        Periodic::new::<tick>("every-5-minutes", "*/5 * * * *", "five".to_owned()),
        Periodic::new::<tick>("hourly-paris", "0 * * * *", "hour".to_owned()).timezone("Europe/Paris"),
    ];
    let enqueuers = [0, 1, 2].map(|_| CronEnqueuer::new(CronConfig::default(), &schedules).expect("valid"));
    let ctxs = ["node-a", "node-b", "node-c"].map(|n| node(&pool, n, &clock));
    let end = utc(2026, 11, 22, 23, 59);
    simulate(&enqueuers, &ctxs, &clock, end, Duration::from_secs(60)).await;

    let five = fired_slots(&pool, "every-5-minutes").await;
    let expected: Vec<DateTime<Utc>> =
        (0..288).map(|i| utc(2026, 11, 22, 0, 0) + chrono::Duration::minutes(5 * i)).collect();
    assert_eq!(five, expected, "every 5-minute slot of the day, once");
    let hourly = fired_slots(&pool, "hourly-paris").await;
    assert_eq!(hourly.len(), 24);
    assert!(hourly.windows(2).all(|w| w[1] - w[0] == chrono::Duration::hours(1)));

    // The durable record: last and next run.
    let mut conn = pool.get().await.expect("conn");
    let row = jobs_core::db::schedules::get(&mut conn, "every-5-minutes").await.expect("get").expect("row");
    assert_eq!(row.last_run_at, Some(utc(2026, 11, 22, 23, 55)));
    assert_eq!(row.next_run_at, Some(utc(2026, 11, 23, 0, 0)));
    assert!(row.last_job_id.is_some());
    let job =
        jobs_core::db::jobs::get(&mut conn, row.last_job_id.expect("id")).await.expect("get").expect("job");
    assert_eq!((job.kind.as_str(), job.queue.as_str(), job.max_attempts), ("cron.tick", "periodic", 2));
    assert_eq!(job.args, serde_json::json!("five"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daylight_saving_changes_in_paris_neither_skip_nor_double_a_daily_job() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(8).expect("pool");
    let schedules = [
        Periodic::new::<tick>("daily-0230-paris", "30 2 * * *", "daily".to_owned()).timezone("Europe/Paris"),
        Periodic::new::<tick>("hourly-paris", "0 * * * *", "hourly".to_owned()).timezone("Europe/Paris"),
    ];
    let enqueuers = [0, 1, 2].map(|_| CronEnqueuer::new(CronConfig::default(), &schedules).expect("valid"));
    for (from, to) in [
        // Spring forward: 2026-03-29, 02:00 → 03:00 in Paris.
        (utc(2026, 3, 28, 12, 0), utc(2026, 3, 30, 12, 0)),
        // Fall back: 2026-10-25, 03:00 → 02:00 in Paris.
        (utc(2026, 10, 24, 12, 0), utc(2026, 10, 26, 12, 0)),
    ] {
        let clock = ManualClock::new(from);
        let ctxs = ["node-a", "node-b", "node-c"].map(|n| node(&pool, n, &clock));
        simulate(&enqueuers, &ctxs, &clock, to, Duration::from_secs(300)).await;
    }
    let daily = fired_slots(&pool, "daily-0230-paris").await;
    assert_eq!(
        daily,
        vec![
            utc(2026, 3, 29, 1, 30), // 02:30 did not exist: 03:30 CEST, once
            utc(2026, 3, 30, 0, 30),
            utc(2026, 10, 25, 0, 30), // 02:30 happened twice: the first (CEST) only
            utc(2026, 10, 26, 1, 30),
        ]
    );
    // The hourly job follows real hours: 23 on the spring-forward day in Paris, 25 on the
    // fall-back day, an hour apart throughout.
    let hourly = fired_slots(&pool, "hourly-paris").await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_slots_are_skipped_or_the_latest_runs_once_never_a_flood() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
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
    let ctx = node(&pool, "node-a", &clock);
    assert!(
        enqueuer.run_once(&ctx).await.expect("first pass").is_empty(),
        "a new schedule starts at its next slot"
    );
    clock.set(utc(2026, 11, 22, 10, 0));
    assert_eq!(enqueuer.run_once(&ctx).await.expect("pass").len(), 2, "both fire on time");
    // Even if a node somehow saw the 10:00 slot as due again (a stale read, a restored
    // row), the per-slot unique key keeps it to one job.
    let mut conn = pool.get().await.expect("conn");
    diesel::sql_query("UPDATE job_schedules SET next_run_at = '2026-11-22T10:00:00Z'")
        .execute(&mut conn)
        .await
        .expect("rewind");
    assert!(enqueuer.run_once(&ctx).await.expect("pass").is_empty(), "the slot's job already exists");

    // Every node is down from 10:00:30 to 15:20: slots 11:00..15:00 are missed.
    clock.set(utc(2026, 11, 22, 15, 20));
    let fired = enqueuer.run_once(&ctx).await.expect("pass after downtime");
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!((fired[0].schedule.as_str(), fired[0].slot), ("hourly-latest", utc(2026, 11, 22, 15, 0)));
    assert!(enqueuer.run_once(&ctx).await.expect("again").is_empty(), "the latest slot runs once");

    // Then both carry on at the next slot.
    clock.set(utc(2026, 11, 22, 16, 0));
    assert_eq!(enqueuer.run_once(&ctx).await.expect("pass").len(), 2);
    assert_eq!(
        fired_slots(&pool, "hourly-skip").await,
        vec![utc(2026, 11, 22, 10, 0), utc(2026, 11, 22, 16, 0)]
    );
    assert_eq!(
        fired_slots(&pool, "hourly-latest").await,
        vec![utc(2026, 11, 22, 10, 0), utc(2026, 11, 22, 15, 0), utc(2026, 11, 22, 16, 0)]
    );
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
async fn schedules_are_retired_disabled_and_run_on_demand() {
    let db = TestDatabase::new().await.expect("test database");
    let pool = db.pool(4).expect("pool");
    let mut conn = pool.get().await.expect("conn");
    let clock = ManualClock::new(utc(2026, 11, 22, 9, 59));
    let ctx = node(&pool, "node-a", &clock);
    let both = [
        Periodic::new::<tick>("kept", "0 * * * *", "kept".to_owned()),
        Periodic::new::<tick>("removed", "0 * * * *", "removed".to_owned()),
    ];
    CronEnqueuer::new(CronConfig::default(), &both).expect("valid").run_once(&ctx).await.expect("pass");

    // A new deploy no longer declares "removed": it is kept, inactive, and does not fire.
    let deployed = CronEnqueuer::new(CronConfig::default(), &both[..1]).expect("valid");
    deployed.run_once(&ctx).await.expect("pass");
    let removed =
        jobs_core::db::schedules::get(&mut conn, "removed").await.expect("get").expect("still listed");
    assert!(!removed.active);
    clock.set(utc(2026, 11, 22, 10, 0));
    let fired = deployed.run_once(&ctx).await.expect("pass");
    assert_eq!(fired.iter().map(|f| f.schedule.as_str()).collect::<Vec<_>>(), ["kept"]);

    // Disabled, it does not fire; re-enabled, it resumes at the next slot without a backlog.
    assert!(jobs_core::db::schedules::set_enabled(&mut conn, "kept", false).await.expect("disable"));
    clock.set(utc(2026, 11, 22, 11, 0));
    assert!(deployed.run_once(&ctx).await.expect("pass").is_empty());
    assert!(jobs_core::db::schedules::set_enabled(&mut conn, "kept", true).await.expect("enable"));
    clock.set(utc(2026, 11, 22, 11, 30));
    assert!(deployed.run_once(&ctx).await.expect("pass").is_empty(), "no backlog after re-enabling");
    clock.set(utc(2026, 11, 22, 12, 0));
    assert_eq!(deployed.run_once(&ctx).await.expect("pass").len(), 1);

    // Run now: enqueued at once, outside the slots.
    let enqueued = jobs_core::cron::run_now(&mut conn, "kept").await.expect("run now").expect("exists");
    let job = jobs_core::db::jobs::get(&mut conn, enqueued.id).await.expect("get").expect("job");
    assert_eq!(job.meta, serde_json::json!({"cron": "kept"}));
    assert!(jobs_core::cron::run_now(&mut conn, "nope").await.expect("run now").is_none());
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
    enqueuer.run_once(&node(&pool, "node-a", &clock)).await.expect("pass");
    let mut conn = pool.get().await.expect("conn");
    let row = jobs_core::db::schedules::get(&mut conn, "cron.nightly").await.expect("get").expect("row");
    assert_eq!(
        (row.expression.as_str(), row.timezone.as_str(), row.missed_policy.as_str()),
        ("0 0 4 * * *", "Europe/Paris", "run_latest")
    );
    assert_eq!(row.next_run_at, Some(utc(2026, 11, 22, 3, 0)), "04:00 in Paris is 03:00 UTC in November");
}
