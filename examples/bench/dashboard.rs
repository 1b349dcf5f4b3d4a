//! Dashboard pages on millions of rows: load jobs straight into the table, then time each
//! page and filter through actix's test service (the p95 of 20 loads after a warm-up),
//! and compare the counts it estimates with exact ones.

use std::time::Instant;

use jobs_core::driver::JobCountParams;
use jobs_core::maintenance::{Archiver, ArchiverConfig, ServiceContext};
use jobs_core::{Count, IntoDriver, JobFilter, JobState};

use crate::measure::{BenchResult, Figures, count, percentile, reset, sql};

/// Loads `n` jobs (97 % completed, the rest spread over the other states; 20 tenants as
/// tags, one job in 50 also tagged `vip`; errors on the failed ones).
async fn load(pool: &jobs_core::Pool, n: u64) -> BenchResult {
    let step = 500_000u64;
    let mut from = 1u64;
    while from <= n {
        let to = (from + step - 1).min(n);
        sql(pool, &format!(
            "INSERT INTO jobs (state, queue, kind, args, meta, tags, attempt, created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors)
             SELECT s.state, 'queue_' || (g % 5), 'kind_' || (g % 10),
                    jsonb_build_object('user_id', g % 100000, 'order', g), jsonb_build_object('request_id', 'req-' || g),
                    ARRAY['tenant_' || (g % 20)] || CASE WHEN g % 50 = 0 THEN ARRAY['vip'] ELSE '{{}}'::text[] END,
                    CASE WHEN s.state = 'available' THEN 0 ELSE 1 END,
                    now() - (({n} - g) || ' milliseconds')::interval, now() - (({n} - g) || ' milliseconds')::interval,
                    CASE WHEN s.state = 'available' THEN NULL ELSE now() END,
                    CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN now() - (({n} - g) || ' milliseconds')::interval END,
                    CASE WHEN s.state = 'available' THEN '{{}}'::text[] ELSE '{{bench-node}}'::text[] END,
                    CASE WHEN s.state = 'discarded' THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'error_type', 'payment', 'message', 'card declined for order ' || g))
                         WHEN s.state = 'retryable' THEN '[{{\"attempt\": 1, \"error_type\": \"timeout\", \"message\": \"the attempt exceeded its 30s timeout\"}}]'::jsonb
                         ELSE '[]'::jsonb END
             FROM generate_series({from}, {to}) AS g,
                  LATERAL (SELECT CASE WHEN g % 100 < 97 THEN 'completed' WHEN g % 100 = 97 THEN 'discarded'
                                       WHEN g % 200 = 196 THEN 'retryable' WHEN g % 200 = 197 THEN 'retryable'
                                       WHEN g % 200 = 198 THEN 'available' ELSE 'cancelled' END::job_state AS state) AS s"
        ))
        .await?;
        from = to + 1;
    }
    // Eight days of counters, as a busy cluster leaves them (the pruner keeps 8 days): every
    // minute, 5 queues × 4 outcomes, and 10 kinds × (4 outcomes + 8 run-time and 4
    // wait-time buckets).
    sql(pool, "TRUNCATE job_stats, job_kind_stats").await?;
    sql(
        pool,
        "INSERT INTO job_stats (bucket, queue, state, count)
         SELECT m, 'queue_' || q, s::job_state, 1 + (extract(epoch FROM m)::int8 + q) % 50
         FROM generate_series(date_trunc('minute', now()) - interval '8 days', date_trunc('minute', now()), interval '1 minute') AS m,
              generate_series(0, 4) AS q, unnest(ARRAY['completed', 'retryable', 'discarded', 'cancelled']) AS s
         ON CONFLICT DO NOTHING",
    )
    .await?;
    sql(
        pool,
        "INSERT INTO job_kind_stats (bucket, kind, metric, idx, count)
         SELECT m, 'kind_' || k, x.metric, x.idx, 1 + (extract(epoch FROM m)::int8 + k + x.idx) % 40
         FROM generate_series(date_trunc('minute', now()) - interval '8 days', date_trunc('minute', now()), interval '1 minute') AS m,
              generate_series(0, 9) AS k,
              (SELECT unnest(ARRAY['completed', 'retried', 'discarded', 'cancelled']) AS metric, 0::int2 AS idx
               UNION ALL SELECT 'run_ms', i::int2 FROM generate_series(3, 10) AS i
               UNION ALL SELECT 'wait_ms', i::int2 FROM generate_series(0, 3) AS i) AS x
         ON CONFLICT DO NOTHING",
    )
    .await?;
    // What the pruner does every pass: minutes older than a day rolled up into hours.
    let compact = jobs_core::driver::StatsCompactParams {
        older_than: std::time::Duration::from_secs(24 * 3600),
        now: None,
    };
    let rolled = pool.into_driver().stats_compact(compact).await?;
    println!("dashboard: rolled {rolled} minute counters up into hours");
    // Finished jobs live in the archive, where completions and the archiver put them.
    let archiver = Archiver::new(ArchiverConfig { batch: 100_000, ..ArchiverConfig::default() });
    let archived = archiver.run_once(&ServiceContext::new(pool.into_driver(), "bench")).await?;
    println!("dashboard: archived {archived} finished jobs");
    // The rows left `jobs` all at once, as no deployment's would: compact it to the size a
    // table holding only the waiting and running jobs has (see "Upgrading" in the guide).
    sql(pool, "VACUUM FULL jobs").await?;
    sql(pool, "VACUUM ANALYZE jobs").await?;
    sql(pool, "VACUUM ANALYZE jobs_archive").await?;
    sql(pool, "VACUUM ANALYZE job_stats").await?;
    sql(pool, "VACUUM ANALYZE job_kind_stats").await?;
    Ok(())
}

/// Loads `n` jobs, then times every page and filter: the p95 and median of 20 loads.
pub(crate) async fn run(url: &str, n: u64, figures: &mut Figures) -> BenchResult {
    use actix_web::{App, test};
    let pool = jobs_core::postgres::pool(url, 8)?;
    reset(&pool).await?;
    let started = Instant::now();
    load(&pool, n).await?;
    println!("dashboard: loaded {n} jobs in {:.0} s", started.elapsed().as_secs_f64());
    let config = jobs_dashboard::DashboardConfig::new(pool.clone());
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let mid = count(&pool, "SELECT (min(id) + max(id)) / 2 AS n FROM jobs_all").await?;
    let window = |minutes_ago: i64| {
        (chrono::Utc::now() - chrono::Duration::minutes(minutes_ago)).format("%Y-%m-%dT%H:%M")
    };
    let pages = [
        "/jobs/".to_owned(),
        "/jobs/?chart=day".to_owned(),
        "/jobs/?chart=week".to_owned(),
        "/jobs/jobs".to_owned(),
        format!("/jobs/jobs?before={mid}"),
        "/jobs/jobs?state=completed".to_owned(),
        "/jobs/jobs?state=discarded".to_owned(),
        "/jobs/jobs?state=cancelled".to_owned(),
        "/jobs/jobs?state=available".to_owned(),
        "/jobs/jobs?state=retryable&state=scheduled".to_owned(),
        "/jobs/jobs?state=retryable&state=scheduled&sort=due".to_owned(),
        "/jobs/jobs?state=completed&sort=finished".to_owned(),
        format!("/jobs/jobs?state=completed&sort=finished&before={mid}"),
        "/jobs/jobs?state=discarded&state=cancelled&sort=finished".to_owned(),
        "/jobs/jobs?queue=queue_3".to_owned(),
        "/jobs/jobs?queue=queue_3&state=retryable".to_owned(),
        "/jobs/jobs?kind=kind_7".to_owned(),
        "/jobs/jobs?tag=tenant_7".to_owned(),
        "/jobs/jobs?tag=vip&state=completed".to_owned(),
        format!("/jobs/jobs?from={}&to={}", window(40), window(20)),
        "/jobs/jobs?state=discarded&q=user_id%3D4297".to_owned(),
        "/jobs/jobs?q=user_id%3D4297".to_owned(),
        "/jobs/jobs?q=request_id%3Dreq-4999990".to_owned(),
        "/jobs/jobs?q=%7B%22order%22%3A+12345%7D&state=completed".to_owned(),
        "/jobs/jobs?q=card+declined".to_owned(),
        // No match: the whole window is read.
        "/jobs/jobs?q=no+such+error+text".to_owned(),
        "/jobs/jobs?q=user_id%3D999999999".to_owned(),
        "/jobs/kinds".to_owned(),
        "/jobs/kinds?window=week".to_owned(),
        "/jobs/jobs?q=timeout&state=retryable".to_owned(),
        format!("/jobs/jobs?q=card+declined&before={mid}"),
        format!("/jobs/jobs?q={mid}"),
        format!("/jobs/jobs/{mid}"),
        "/jobs/jobs/new".to_owned(),
        "/jobs/queues".to_owned(),
        "/jobs/cron".to_owned(),
    ];
    let mut timings = serde_json::Map::new();
    let mut worst = 0.0_f64;
    for page in &pages {
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
        println!("  {page:<64} p50 {median:>7.1} ms  p95 {p95:>7.1} ms");
        timings.insert(page.clone(), serde_json::json!({ "p50_ms": median, "p95_ms": p95 }));
    }
    println!("  worst p95: {worst:.1} ms");
    // Estimated counts against exact ones.
    let driver = (&pool).into_driver();
    let mut estimates = serde_json::Map::new();
    let cases: Vec<(String, JobFilter, String)> = vec![
        (
            "completed".into(),
            JobFilter { states: vec![JobState::Completed], ..JobFilter::default() },
            "state = 'completed'".into(),
        ),
        (
            "discarded".into(),
            JobFilter { states: vec![JobState::Discarded], ..JobFilter::default() },
            "state = 'discarded'".into(),
        ),
        (
            "cancelled".into(),
            JobFilter { states: vec![JobState::Cancelled], ..JobFilter::default() },
            "state = 'cancelled'".into(),
        ),
        (
            "queue_3".into(),
            JobFilter { queue: Some("queue_3".into()), ..JobFilter::default() },
            "queue = 'queue_3'".into(),
        ),
        (
            "tag tenant_7".into(),
            JobFilter { tag: Some("tenant_7".into()), ..JobFilter::default() },
            "tags @> '{tenant_7}'".into(),
        ),
        (
            "tag vip".into(),
            JobFilter { tag: Some("vip".into()), ..JobFilter::default() },
            "tags @> '{vip}'".into(),
        ),
        (
            "created 40 to 20 minutes ago".into(),
            JobFilter {
                from: Some(chrono::Utc::now() - chrono::Duration::minutes(40)),
                to: Some(chrono::Utc::now() - chrono::Duration::minutes(20)),
                ..JobFilter::default()
            },
            "created_at >= now() - interval '40 minutes' AND created_at < now() - interval '20 minutes'"
                .into(),
        ),
    ];
    for (name, filter, predicate) in cases {
        let shown = driver.job_count(JobCountParams { filter: &filter, cap: 10_000 }).await?;
        let exact = count(&pool, &format!("SELECT count(*) AS n FROM jobs_all WHERE {predicate}")).await?;
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
    figures.insert(
        "dashboard_pages".into(),
        serde_json::json!({ "jobs": n, "loads": 20, "ms": timings, "worst_p95_ms": worst, "counts": estimates }),
    );
    Ok(())
}
