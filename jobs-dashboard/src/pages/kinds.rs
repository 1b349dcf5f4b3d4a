//! Per-kind metrics over the last hour, day or week, from the per-kind counters
//! (`stats_kinds`): how many completed, the failure rate, and how long attempts ran and
//! waited once due (p50, p95), busiest kinds first.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{KindStats, StatsKindsParams};

use super::chart::Window;
use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::view::{self, PageCtx, filters, human_duration};

/// One kind's line.
pub(crate) struct KindLine {
    pub(crate) kind: String,
    pub(crate) completed: i64,
    pub(crate) retried: i64,
    pub(crate) discarded: i64,
    pub(crate) cancelled: i64,
    /// Failed attempts over ended ones, as a percentage.
    pub(crate) failure_rate: String,
    pub(crate) run_p50: String,
    pub(crate) run_p95: String,
    pub(crate) wait_p50: String,
    pub(crate) wait_p95: String,
}

#[derive(Template)]
#[template(path = "kinds.html")]
struct KindsPage {
    c: PageCtx,
    window: Window,
    windows: [Window; 3],
    kinds: Vec<KindLine>,
}

fn quantile(h: &jobs_core::driver::Histogram, p: f64) -> String {
    h.quantile(p).map_or_else(|| "–".to_owned(), |d| human_duration(d.as_secs_f64()))
}

fn line(k: KindStats) -> KindLine {
    KindLine {
        failure_rate: k.failure_rate().map_or_else(|| "–".to_owned(), |r| format!("{:.1} %", r * 100.0)),
        run_p50: quantile(&k.run, 0.5),
        run_p95: quantile(&k.run, 0.95),
        wait_p50: quantile(&k.wait, 0.5),
        wait_p95: quantile(&k.wait, 0.95),
        kind: k.kind,
        completed: k.completed,
        retried: k.retried,
        discarded: k.discarded,
        cancelled: k.cancelled,
    }
}

/// `GET /kinds?window=hour|day|week`.
pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "kinds")?;
    let pairs = crate::params::pairs(req.query_string().as_bytes());
    let window = Window::parse(crate::params::value(&pairs, "window"))?;
    let params = StatsKindsParams { window: window.params().window, now: None };
    let mut kinds = d.config.reads().stats_kinds(params).await?;
    kinds.sort_by_key(|k| std::cmp::Reverse(k.completed + k.retried + k.discarded + k.cancelled));
    let cookies = c.take_cookies();
    let page = KindsPage { c, window, windows: Window::ALL, kinds: kinds.into_iter().map(line).collect() };
    view::respond(&page, cookies)
}
