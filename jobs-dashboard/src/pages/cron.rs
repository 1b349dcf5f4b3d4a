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
    /// The next three slots, as `<time>` elements (none when it will not fire).
    pub(crate) next_runs: Vec<String>,
    /// Why its expression does not parse.
    pub(crate) invalid: Option<String>,
    /// Its last run, as a `<time>` element.
    pub(crate) last_run: Option<String>,
    pub(crate) last_job: Option<LastJob>,
}

/// The job a schedule enqueued last.
pub(crate) struct LastJob {
    pub(crate) id: i64,
    /// Its state, or `pruned`.
    pub(crate) state: String,
    /// Enqueued by "run now", not by a slot.
    pub(crate) run_now: bool,
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
        let mut invalid = None;
        // Only a schedule that will fire has next runs.
        let mut next_runs = Vec::new();
        if row.enabled && row.active {
            match CronExpr::parse(&row.expression, &row.timezone) {
                Ok(expr) => {
                    let mut t = chrono::Utc::now();
                    for _ in 0..3 {
                        match expr.next_after(t) {
                            Some(next) => {
                                next_runs.push(view::time_html(&next));
                                t = next;
                            }
                            None => break,
                        }
                    }
                }
                Err(e) => invalid = Some(e),
            }
        }
        let last_job = match row.last_job_id {
            Some(id) => driver
                .job_get(JobGetParams { id })
                .await?
                .map(|j| LastJob {
                    id,
                    state: j.state.as_str().to_owned(),
                    run_now: j.meta.get("run_now").and_then(|v| v.as_bool()).unwrap_or(false),
                })
                .or(Some(LastJob { id, state: "pruned".into(), run_now: false })),
            None => None,
        };
        schedules.push(ScheduleView {
            last_run: row.last_run_at.map(|t| view::time_html(&t)),
            invalid,
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
    let cookies = c.take_cookies();
    view::respond(&CronPage { c, schedules }, cookies)
}
