//! Zero and absurd settings are typed errors from `build()` (and from a service's own
//! `run_once()`), naming the setting; a service run directly with one does not panic or
//! spin, it stops. Before, a zero interval panicked inside tokio and a zero batch looped
//! forever.

use std::time::Duration;

use jobs_core::maintenance::{
    CronConfig, LeaderConfig, LeaderElector, Pruner, PrunerConfig, Rescuer, RescuerConfig, Scheduler,
    SchedulerConfig, ServiceContext,
};
use jobs_core::{Error, QueueConfig, UnknownKindPolicy, Worker, WorkerBuilder};
use jobs_tests::conformance::registry;
use tokio_util::sync::CancellationToken;

/// A pool that is never connected to: `build()` and the checks touch no database.
fn pool() -> jobs_core::postgres::Pool {
    jobs_core::postgres::pool("postgres://nobody@127.0.0.1:1/nothing", 1).expect("a lazy pool")
}

fn worker() -> WorkerBuilder {
    Worker::builder(pool()).queue("work", 4).registry(registry())
}

fn refused(builder: WorkerBuilder) -> &'static str {
    match builder.build() {
        Err(Error::InvalidOption { option, .. }) => option,
        Err(other) => panic!("expected InvalidOption, got {other}"),
        Ok(_) => panic!("the worker was built"),
    }
}

const ZERO: Duration = Duration::ZERO;

#[test]
fn the_defaults_build() {
    worker().build().expect("the defaults are valid");
}

#[test]
fn zero_intervals_batches_and_counts_are_refused_by_name() {
    let ms = Duration::from_millis;
    let cases: Vec<(&str, WorkerBuilder)> = vec![
        ("poll_interval", worker().poll_interval(ZERO)),
        ("heartbeat_interval", worker().heartbeat_interval(ZERO)),
        ("max_fetch", worker().max_fetch(0)),
        ("claims_in_flight", worker().claims_in_flight(0)),
        ("concurrency", worker().queue_config(QueueConfig::new("work", 0))),
        ("per_key_limit", worker().queue_config(QueueConfig::new("work", 4).per_key_limit(0))),
        ("global_limit", worker().queue_config(QueueConfig::new("work", 4).global_limit(0))),
        ("global_limit", worker().queue_config(QueueConfig::new("work", 4).global_limit(1_000_000))),
        (
            "rate_limit",
            worker().queue_config(QueueConfig::new("work", 4).rate_limit(0, Duration::from_secs(60))),
        ),
        (
            "rate_limit",
            worker()
                .queue_config(QueueConfig::new("work", 4).per_key_rate_limit(5, Duration::from_millis(500))),
        ),
        (
            "rate_limit",
            worker()
                .queue_config(QueueConfig::new("work", 4).per_key_rate_limit(5, Duration::from_secs(90_000))),
        ),
        ("unknown_kinds.postpone", worker().unknown_kinds(UnknownKindPolicy::Postpone(ZERO))),
        ("leader.interval", worker().leader(LeaderConfig { interval: ZERO, ..LeaderConfig::default() })),
        ("leader.ttl", worker().leader(LeaderConfig { ttl: ZERO, ..LeaderConfig::default() })),
        (
            "scheduler.interval",
            worker().scheduler(SchedulerConfig { interval: ZERO, ..SchedulerConfig::default() }),
        ),
        ("scheduler.batch", worker().scheduler(SchedulerConfig { batch: 0, ..SchedulerConfig::default() })),
        ("rescuer.interval", worker().rescuer(RescuerConfig { interval: ZERO, ..RescuerConfig::default() })),
        ("rescuer.batch", worker().rescuer(RescuerConfig { batch: 0, ..RescuerConfig::default() })),
        (
            "rescuer.node_stale_after",
            worker().rescuer(RescuerConfig { node_stale_after: ZERO, ..RescuerConfig::default() }),
        ),
        ("pruner.interval", worker().pruner(PrunerConfig { interval: ZERO, ..PrunerConfig::default() })),
        ("pruner.batch", worker().pruner(PrunerConfig { batch: 0, ..PrunerConfig::default() })),
        ("pruner.max_batches", worker().pruner(PrunerConfig { max_batches: 0, ..PrunerConfig::default() })),
        ("cron.interval", worker().cron(CronConfig { interval: ZERO, ..CronConfig::default() })),
        // Absurd: a lease that lapses between renewals, a node declared dead between two
        // of its heartbeats, a period past any timer, a negative or huge batch.
        (
            "leader.ttl",
            worker().leader(LeaderConfig { ttl: ms(3_000), interval: ms(3_000), ..LeaderConfig::default() }),
        ),
        ("rescuer.node_stale_after", worker().heartbeat_interval(ms(20_000))),
        ("poll_interval", worker().poll_interval(Duration::MAX)),
        ("scheduler.batch", worker().scheduler(SchedulerConfig { batch: -5, ..SchedulerConfig::default() })),
        ("pruner.batch", worker().pruner(PrunerConfig { batch: 10_000_000, ..PrunerConfig::default() })),
        ("max_fetch", worker().max_fetch(usize::MAX)),
    ];
    for (option, builder) in cases {
        assert_eq!(refused(builder), option);
    }
    // Without maintenance, the services' settings do not matter.
    let quiet =
        worker().without_maintenance().scheduler(SchedulerConfig { batch: 0, ..SchedulerConfig::default() });
    quiet.build().expect("maintenance is off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_given_a_bad_setting_refuses_to_run_instead_of_panicking_or_spinning() {
    let ctx = ServiceContext::new(pool(), "node");
    // One pass: refused before any query (the pool would fail to connect).
    let scheduler = Scheduler::new(SchedulerConfig { batch: 0, ..SchedulerConfig::default() });
    assert!(matches!(
        scheduler.run_once(&ctx).await,
        Err(Error::InvalidOption { option: "scheduler.batch", .. })
    ));
    let rescuer = Rescuer::new(RescuerConfig { batch: 0, ..RescuerConfig::default() });
    assert!(matches!(
        rescuer.run_once(&ctx).await,
        Err(Error::InvalidOption { option: "rescuer.batch", .. })
    ));
    let pruner = Pruner::new(PrunerConfig { max_batches: 0, ..PrunerConfig::default() });
    assert!(matches!(
        pruner.run_once(&ctx).await,
        Err(Error::InvalidOption { option: "pruner.max_batches", .. })
    ));
    let elector = LeaderElector::new(LeaderConfig { interval: ZERO, ..LeaderConfig::default() });
    assert!(matches!(
        elector.run_once(&ctx).await,
        Err(Error::InvalidOption { option: "leader.interval", .. })
    ));

    // The loops stop at once (a zero interval used to panic inside tokio's timer).
    let stop = CancellationToken::new();
    let loops = async {
        Scheduler::new(SchedulerConfig { interval: ZERO, ..SchedulerConfig::default() })
            .run(ctx.clone(), stop.clone())
            .await;
        Pruner::new(PrunerConfig { interval: ZERO, ..PrunerConfig::default() })
            .run(ctx.clone(), stop.clone())
            .await;
        Rescuer::new(RescuerConfig { interval: ZERO, ..RescuerConfig::default() })
            .run(ctx.clone(), stop.clone())
            .await;
        elector.run(ctx.clone(), stop.clone()).await;
    };
    tokio::time::timeout(Duration::from_secs(10), loops).await.expect("the services stop by themselves");
}

/// Two kinds of one queue that declare different limits: the worker refuses to start,
/// naming both (a limit is the queue's); the same limit on both, or the queue's own, is
/// fine.
#[test]
fn kinds_of_one_queue_must_declare_the_same_limit() {
    use jobs_core::{JobContext, Registry, job};

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Export {
        customer: String,
    }

    #[job(kind = "settings.export", queue = "exports", limit = 1, partition_by = "customer")]
    async fn export(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[job(kind = "settings.report", queue = "exports")]
    async fn report(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
        Ok(())
    }

    #[job(kind = "settings.invoice", queue = "exports", limit = 1, partition_by = "customer")]
    async fn invoice(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
        Ok(())
    }

    let mixed = Registry::new().with::<export>().and_then(|r| r.with::<report>()).expect("registry");
    match Worker::builder(pool()).queue("exports", 4).registry(mixed).build() {
        Err(Error::InvalidOption { option: "limit", reason }) => {
            assert!(reason.contains("settings.export") && reason.contains("settings.report"), "{reason}");
        }
        Err(other) => panic!("expected InvalidOption, got {other}"),
        Ok(_) => panic!("the worker was built"),
    }
    let same = Registry::new().with::<export>().and_then(|r| r.with::<invoice>()).expect("registry");
    Worker::builder(pool()).queue("exports", 4).registry(same).build().expect("the same limit on both");
}
