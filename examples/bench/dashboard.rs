//! Dashboard pages on millions of rows: load jobs straight into the table, then time each
//! page through actix's test service.

use std::time::Instant;

use crate::measure::{BenchResult, Figures, count, reset, sql};

/// Loads `n` jobs straight into the table (97 % completed, the rest spread over the other
/// states), then times each dashboard page: the median of 5 requests after a warm-up.
pub(crate) async fn run(url: &str, n: u64, figures: &mut Figures) -> BenchResult {
    use actix_web::{App, test};
    let pool = jobs_core::postgres::pool(url, 8)?;
    reset(&pool).await?;
    let load = Instant::now();
    let step = 500_000u64;
    let mut from = 1u64;
    while from <= n {
        let to = (from + step - 1).min(n);
        sql(&pool, &format!(
            "INSERT INTO jobs (state, queue, kind, args, meta, attempt, created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors)
             SELECT s.state, 'queue_' || (g % 5), 'kind_' || (g % 10),
                    jsonb_build_object('user_id', g % 100000, 'order', g), '{{\"request_id\": \"r\"}}'::jsonb,
                    CASE WHEN s.state = 'available' THEN 0 ELSE 1 END,
                    now() - (({n} - g) || ' milliseconds')::interval, now() - (({n} - g) || ' milliseconds')::interval,
                    CASE WHEN s.state = 'available' THEN NULL ELSE now() END,
                    CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN now() END,
                    CASE WHEN s.state = 'available' THEN '{{}}'::text[] ELSE '{{bench-node}}'::text[] END,
                    CASE WHEN s.state IN ('discarded', 'retryable') THEN '[{{\"attempt\": 1, \"message\": \"boom\"}}]'::jsonb ELSE '[]'::jsonb END
             FROM generate_series({from}, {to}) AS g,
                  LATERAL (SELECT CASE WHEN g % 100 < 97 THEN 'completed' WHEN g % 100 = 97 THEN 'discarded'
                                       WHEN g % 200 = 196 THEN 'retryable' WHEN g % 200 = 197 THEN 'retryable'
                                       WHEN g % 200 = 198 THEN 'available' ELSE 'cancelled' END::job_state AS state) AS s"
        ))
        .await?;
        from = to + 1;
    }
    sql(&pool, "VACUUM ANALYZE jobs").await?;
    println!("dashboard: loaded {n} jobs in {:.0} s", load.elapsed().as_secs_f64());
    let config = jobs_dashboard::DashboardConfig::new(pool.clone());
    let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
    let mid = count(&pool, "SELECT (min(id) + max(id)) / 2 AS n FROM jobs").await?;
    let pages = [
        "/jobs/".to_owned(),
        "/jobs/jobs".to_owned(),
        format!("/jobs/jobs?before={mid}"),
        "/jobs/jobs?state=discarded".to_owned(),
        "/jobs/jobs?state=available".to_owned(),
        "/jobs/jobs?queue=queue_3".to_owned(),
        "/jobs/jobs?queue=queue_3&state=retryable".to_owned(),
        "/jobs/jobs?kind=kind_7".to_owned(),
        "/jobs/jobs?state=discarded&q=user_id%3D4297".to_owned(),
        "/jobs/jobs?q=user_id%3D4297".to_owned(),
        format!("/jobs/jobs/{mid}"),
        "/jobs/queues".to_owned(),
        "/jobs/cron".to_owned(),
    ];
    let mut timings = serde_json::Map::new();
    for page in &pages {
        let mut samples = Vec::new();
        for i in 0..6 {
            let started = Instant::now();
            let response = test::call_service(&app, test::TestRequest::get().uri(page).to_request()).await;
            let status = response.status();
            let _ = test::read_body(response).await;
            if !status.is_success() {
                return Err(format!("{page}: {status}").into());
            }
            if i > 0 {
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        samples.sort_by(f64::total_cmp);
        let median = samples[samples.len() / 2];
        println!("  {page:<48} {median:>8.1} ms");
        timings.insert(page.clone(), serde_json::json!(median));
    }
    figures.insert("dashboard_page_ms".into(), serde_json::json!({ "jobs": n, "median_ms": timings }));
    Ok(())
}
