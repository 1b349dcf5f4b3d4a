//! Cron schedules: expression, next runs, last run and its outcome; enable, disable, run
//! now.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::cron::CronExpr;
use jobs_core::driver::{JobGetParams, ScheduleListParams};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::view::{self, PageCtx};

/// A schedule as the page shows it.
pub(crate) struct ScheduleView {
    pub(crate) name: String,
    pub(crate) expression: String,
    pub(crate) timezone: String,
    pub(crate) kind: String,
    pub(crate) enabled: bool,
    pub(crate) active: bool,
    pub(crate) next_runs: Vec<String>,
    pub(crate) last_run: String,
    pub(crate) last_job: Option<(i64, String)>,
}

#[derive(Template)]
#[template(path = "cron.html")]
struct CronPage {
    c: PageCtx,
    schedules: Vec<ScheduleView>,
}

pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "cron")?;
    let driver = d.config.reads();
    let mut schedules = Vec::new();
    for row in driver.schedule_list(ScheduleListParams {}).await? {
        let mut next_runs = Vec::new();
        match CronExpr::parse(&row.expression, &row.timezone) {
            Ok(expr) => {
                let mut t = chrono::Utc::now();
                for _ in 0..3 {
                    match expr.next_after(t) {
                        Some(next) => {
                            next_runs.push(view::time(&next));
                            t = next;
                        }
                        None => break,
                    }
                }
            }
            Err(e) => next_runs.push(e),
        }
        let last_job = match row.last_job_id {
            Some(id) => driver
                .job_get(JobGetParams { id })
                .await?
                .map(|j| (id, j.state.as_str().to_owned()))
                .or(Some((id, "pruned".into()))),
            None => None,
        };
        schedules.push(ScheduleView {
            last_run: row.last_run_at.map(|t| view::time(&t)).unwrap_or_else(|| "never".into()),
            name: row.name,
            expression: row.expression,
            timezone: row.timezone,
            kind: row.kind,
            enabled: row.enabled,
            active: row.active,
            next_runs,
            last_job,
        });
    }
    let cookie = c.take_cookie();
    view::respond(&CronPage { c, schedules }, cookie)
}
