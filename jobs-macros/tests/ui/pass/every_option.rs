use std::time::Duration;

use jobs_core::{Backoff, Job, JobContext, JobState, Outcome, PartitionBy, UniqueBy, job};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Default)]
pub struct Report {
    pub account: i64,
    pub month: String,
}

fn slow_backoff(attempt: i32) -> Duration {
    Duration::from_secs(60 * attempt as u64)
}

type AppResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Builds a monthly report.
#[job(
    kind = "reports.monthly",
    queue = "reports",
    priority = -1,
    max_attempts = 3,
    timeout = "2m 30s",
    backoff = custom(slow_backoff),
    unique(fields(account, month), period = "1h", states(available, running), by_queue),
    tags = ["reports", "billing:v2"],
    cron = "0 6 1 * *",
    cron_tz = "Europe/Paris",
    cron_missed = "run_latest",
)]
pub async fn monthly_report(ctx: JobContext, args: Report) -> AppResult<Outcome<u64>> {
    if ctx.is_cancelled() {
        return Ok(Outcome::snooze(Duration::from_secs(5)));
    }
    Ok(Outcome::Complete(args.account as u64))
}

#[job(backoff = exponential(base = "1s", max = "1m"), unique)]
async fn no_args(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(backoff = linear(step = "10s"), unique(kind))]
async fn linear(_ctx: JobContext, _n: u8) -> Result<Vec<String>, String> {
    Ok(vec![])
}

#[job(backoff = constant("500ms"), unique(key = "singleton"))]
async fn constant(_ctx: JobContext, (a, b): (i32, i32)) -> Result<i32, std::fmt::Error> {
    Ok(a + b)
}

#[derive(Serialize, Deserialize)]
pub struct Export {
    pub customer: Customer,
}

#[derive(Serialize, Deserialize)]
pub struct Customer {
    pub id: i64,
}

/// One export per customer at a time.
#[job(queue = "exports", limit = 1, partition_by = "customer.id")]
async fn export(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
    Ok(())
}

/// Three per tenant, the tenant given in the metadata.
#[job(queue = "tenants", limit = 3, partition_by = "meta.tenant")]
async fn by_tenant(_ctx: JobContext, _args: Report) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {
    assert_eq!(monthly_report::KIND, "reports.monthly");
    assert_eq!(<monthly_report as Job>::KIND, "reports.monthly");
    let options = monthly_report::options();
    assert_eq!(options.queue, "reports");
    assert_eq!(options.priority, -1);
    assert_eq!(options.max_attempts, 3);
    assert_eq!(options.timeout, Some(Duration::from_secs(150)));
    assert!(matches!(options.backoff, Backoff::Custom(_)));
    let unique = options.unique.expect("unique");
    assert_eq!(unique.by, UniqueBy::Fields(vec!["account".into(), "month".into()]));
    assert_eq!(unique.period, Some(Duration::from_secs(3600)));
    assert_eq!(unique.states, vec![JobState::Available, JobState::Running]);
    assert!(unique.by_queue);
    assert_eq!(options.tags, vec!["reports", "billing:v2"]);

    assert_eq!(no_args::KIND, concat!(module_path!(), "::no_args"));
    assert_eq!(no_args::options().unique.expect("unique").by, UniqueBy::Args);
    assert_eq!(linear::options().unique.expect("unique").by, UniqueBy::Kind);
    assert!(matches!(constant::options().backoff, Backoff::Constant(d) if d == Duration::from_millis(500)));

    assert_eq!(export::options().limit, Some(1));
    assert_eq!(export::options().partition_by, Some(PartitionBy::Arg("customer.id".into())));
    assert_eq!(by_tenant::options().partition_by, Some(PartitionBy::Meta("tenant".into())));

    let _request: jobs_core::EnqueueRequest<monthly_report> = monthly_report::build(Report::default());
}
