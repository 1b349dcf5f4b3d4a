//! Dashboard pages on millions of rows, in data of several shapes (`dashboard_data`): load
//! the jobs straight into the tables, then time each page and filter through actix's test
//! service (the p95 of 20 loads after a warm-up), and compare the counts it shows with
//! exact ones.

use std::sync::Arc;
use std::time::Instant;

use jobs_core::driver::{Driver, JobCountParams, JobListParams};
use jobs_core::{Count, JobFilter, JobState};

use crate::dashboard_data::{self, DataShape};
use crate::measure::{BenchResult, Figures, percentile};
use crate::target::Admin;

/// Every page and filter timed for `shape` on `n` jobs: the overview, each state, each
/// sort, a tenant, a kind and a queue alone and with each state, time windows, searches.
fn pages(shape: &DataShape, n: u64, newest: chrono::DateTime<chrono::Utc>) -> Vec<String> {
    let mid = n / 2;
    let window =
        |minutes_ago: i64| (newest - chrono::Duration::minutes(minutes_ago)).format("%Y-%m-%dT%H:%M");
    // A created window inside the data (one job a millisecond, the newest created at
    // `newest`, read from the data: a reused load is older than this run): from 40 % to
    // 20 % of its span before the newest, a fifth of the jobs.
    let span_minutes = i64::try_from(n / 60_000).unwrap_or(i64::MAX).max(5);
    let (from, to) = (window(span_minutes * 2 / 5), window(span_minutes / 5));
    let tenant = format!("tenant_{}", shape.tenants * 7 / 10);
    let kind_number = shape.kinds * 4 / 10;
    let kind = format!("kind_{kind_number}");
    let queue = format!("queue_{}", (kind_number + 1) % shape.queues);
    let mut pages = vec![
        "/jobs/".to_owned(),
        "/jobs/?chart=day".to_owned(),
        "/jobs/?chart=week".to_owned(),
        "/jobs/jobs".to_owned(),
        format!("/jobs/jobs?before={mid}"),
        "/jobs/jobs?sort=oldest".to_owned(),
    ];
    for state in JobState::ALL {
        pages.push(format!("/jobs/jobs?state={state}"));
    }
    pages.extend([
        "/jobs/jobs?state=retryable&state=scheduled".to_owned(),
        "/jobs/jobs?state=retryable&state=scheduled&sort=due".to_owned(),
        "/jobs/jobs?state=completed&sort=finished".to_owned(),
        format!("/jobs/jobs?state=completed&sort=finished&before={mid}"),
        "/jobs/jobs?state=discarded&state=cancelled&sort=finished".to_owned(),
    ]);
    // A tenant, a kind and a queue: alone, with each state, in each sort, in a window.
    for (key, value) in [("tag", &tenant), ("kind", &kind), ("queue", &queue)] {
        pages.push(format!("/jobs/jobs?{key}={value}"));
        for state in JobState::ALL {
            pages.push(format!("/jobs/jobs?{key}={value}&state={state}"));
        }
        pages.extend([
            format!("/jobs/jobs?{key}={value}&sort=oldest"),
            format!("/jobs/jobs?{key}={value}&state=completed&sort=finished"),
            format!("/jobs/jobs?{key}={value}&state=scheduled&state=retryable&sort=due"),
            format!("/jobs/jobs?{key}={value}&from={from}&to={to}"),
            format!("/jobs/jobs?{key}={value}&before={mid}"),
        ]);
    }
    pages.extend([
        format!("/jobs/jobs?tag={tenant}&kind={kind}"),
        "/jobs/jobs?tag=vip&state=completed".to_owned(),
        format!("/jobs/jobs?from={from}&to={to}"),
        "/jobs/jobs?state=discarded&q=user_id%3D4297".to_owned(),
        "/jobs/jobs?q=user_id%3D4297".to_owned(),
        format!("/jobs/jobs?q=request_id%3Dreq-{}", n - 10),
        "/jobs/jobs?q=%7B%22order%22%3A+12345%7D&state=completed".to_owned(),
        "/jobs/jobs?q=card+declined".to_owned(),
        // No match: the whole window is read.
        "/jobs/jobs?q=no+such+error+text".to_owned(),
        "/jobs/jobs?q=user_id%3D999999999".to_owned(),
        "/jobs/jobs?q=timeout&state=retryable".to_owned(),
        format!("/jobs/jobs?q=card+declined&before={mid}"),
        format!("/jobs/jobs?q={mid}"),
        format!("/jobs/jobs/{mid}"),
        "/jobs/jobs/new".to_owned(),
        "/jobs/kinds".to_owned(),
        "/jobs/kinds?window=day".to_owned(),
        "/jobs/kinds?window=week".to_owned(),
        "/jobs/queues".to_owned(),
        "/jobs/cron".to_owned(),
    ]);
    pages
}

/// For each shape: loads `n` jobs, then times every page and filter (the p95 and median of
/// 20 loads) and compares the counts shown with exact ones. With `reuse`, measures the
/// jobs already loaded; only the pages whose address contains `matching`.
pub(crate) async fn run(
    admin: &Admin,
    n: u64,
    shapes: &[DataShape],
    reuse: bool,
    matching: &str,
    figures: &mut Figures,
) -> BenchResult {
    for shape in shapes {
        let started = Instant::now();
        if !reuse {
            dashboard_data::load(admin, shape, n).await?;
        }
        println!(
            "dashboard {}: loaded {n} jobs ({} tenants, {} kinds, {} queues, {} error types) in {:.0} s",
            shape.name,
            shape.tenants,
            shape.kinds,
            shape.queues,
            shape.errors,
            started.elapsed().as_secs_f64()
        );
        let newest = admin
            .driver
            .job_list(JobListParams { filter: &JobFilter::default(), before: None, limit: 1 })
            .await?
            .first()
            .map_or_else(chrono::Utc::now, |job| job.created_at);
        let pages: Vec<String> =
            pages(shape, n, newest).into_iter().filter(|p| p.contains(matching)).collect();
        let (timings, worst) = time_pages(admin.driver.clone(), &pages).await?;
        let counts = compare_counts(admin, shape).await?;
        figures.insert(
            format!("dashboard_pages_{}", shape.name),
            serde_json::json!({
                "backend": admin.driver.name(), "jobs": n, "tenants": shape.tenants, "kinds": shape.kinds,
                "queues": shape.queues, "errors": shape.errors, "loads": 20, "ms": timings,
                "worst_p95_ms": worst, "counts": counts,
            }),
        );
    }
    Ok(())
}

/// Loads each page 21 times (the first a warm-up): p50 and p95 per page, and the worst p95.
async fn time_pages(driver: Arc<dyn Driver>, pages: &[String]) -> BenchResult<(serde_json::Value, f64)> {
    use actix_web::{App, test};
    let config = jobs_dashboard::DashboardConfig::new(driver);
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let mut timings = serde_json::Map::new();
    let mut worst = 0.0_f64;
    for page in pages {
        let mut samples = Vec::new();
        for i in 0..21 {
            let started = Instant::now();
            let response = test::call_service(&app, test::TestRequest::get().uri(page).to_request()).await;
            let status = response.status();
            let _ = test::read_body(response).await;
            if !(status.is_success() || status.is_redirection()) {
                return Err(format!("{page}: {status}").into());
            }
            if i > 0 {
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        samples.sort_by(f64::total_cmp);
        let (median, p95) = (percentile(&samples, 0.5), percentile(&samples, 0.95));
        worst = worst.max(p95);
        println!("  {page:<72} p50 {median:>7.1} ms  p95 {p95:>7.1} ms");
        timings.insert(page.clone(), serde_json::json!({ "p50_ms": median, "p95_ms": p95 }));
    }
    println!("  worst p95: {worst:.1} ms");
    Ok((serde_json::Value::Object(timings), worst))
}

/// The counts the dashboard shows (exact up to its cap, then estimated or "more than")
/// against exact counts.
async fn compare_counts(admin: &Admin, shape: &DataShape) -> BenchResult<serde_json::Value> {
    let tenant = format!("tenant_{}", shape.tenants * 7 / 10);
    let kind = format!("kind_{}", shape.kinds * 4 / 10);
    let queue = "queue_3".to_owned();
    let contains = |tag: &str| {
        if admin.is_postgres() {
            format!("tags @> '{{{tag}}}'")
        } else if admin.is_sqlite() {
            format!("EXISTS (SELECT 1 FROM json_each(tags) WHERE value = '{tag}')")
        } else {
            format!("JSON_CONTAINS(tags, '\"{tag}\"')")
        }
    };
    let state = |s: JobState| JobFilter { states: vec![s], ..JobFilter::default() };
    let cases: Vec<(String, JobFilter, String)> = vec![
        ("completed".into(), state(JobState::Completed), "state = 'completed'".into()),
        ("discarded".into(), state(JobState::Discarded), "state = 'discarded'".into()),
        ("available".into(), state(JobState::Available), "state = 'available'".into()),
        (
            queue.clone(),
            JobFilter { queue: Some(queue.clone()), ..JobFilter::default() },
            format!("queue = '{queue}'"),
        ),
        (
            kind.clone(),
            JobFilter { kind: Some(kind.clone()), ..JobFilter::default() },
            format!("kind = '{kind}'"),
        ),
        (
            format!("{kind} discarded"),
            JobFilter { kind: Some(kind.clone()), ..state(JobState::Discarded) },
            format!("kind = '{kind}' AND state = 'discarded'"),
        ),
        (
            format!("tag {tenant}"),
            JobFilter { tag: Some(tenant.clone()), ..JobFilter::default() },
            contains(&tenant),
        ),
        (
            format!("tag {tenant} completed"),
            JobFilter { tag: Some(tenant.clone()), ..state(JobState::Completed) },
            format!("{} AND state = 'completed'", contains(&tenant)),
        ),
        ("tag vip".into(), JobFilter { tag: Some("vip".into()), ..JobFilter::default() }, contains("vip")),
        // Counts no index serves: on Postgres past its time budget, then estimated.
        (
            format!("{kind} completed"),
            JobFilter { kind: Some(kind.clone()), ..state(JobState::Completed) },
            format!("kind = '{kind}' AND state = 'completed'"),
        ),
        (
            format!("tag {tenant} {kind}"),
            JobFilter { tag: Some(tenant.clone()), kind: Some(kind.clone()), ..JobFilter::default() },
            format!("{} AND kind = '{kind}'", contains(&tenant)),
        ),
    ];
    let mut estimates = serde_json::Map::new();
    for (name, filter, predicate) in cases {
        let shown = admin
            .driver
            .job_count(JobCountParams { filter: &filter, cap: jobs_dashboard::COUNT_CAP })
            .await?;
        let exact = admin.number(&format!("SELECT count(*) AS n FROM jobs_all WHERE {predicate}")).await?;
        let (kind, value) = match shown {
            Count::Exact(v) => ("exact", v),
            Count::Estimate(v) => ("estimate", v),
            Count::AtLeast(v) => ("at least", v),
        };
        let off = (value - exact) as f64 / exact.max(1) as f64 * 100.0;
        println!("  count {name:<30} {kind:<8} {value:>9}  exact {exact:>9}  off {off:>+6.1} %");
        estimates.insert(
            name,
            serde_json::json!({ "shown": value, "kind": kind, "exact": exact, "off_percent": off }),
        );
    }
    Ok(serde_json::Value::Object(estimates))
}
