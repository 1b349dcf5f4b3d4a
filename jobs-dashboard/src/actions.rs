//! Every POST: retry, cancel, delete or run one job, the selected jobs, or all jobs
//! matching a filter (after a confirmation stating the count, in bounded batches); pause
//! and resume queues (their concurrency and limits: `queue_settings`); enable, disable and
//! run schedules.
//!
//! Each checks the access hook (read-only users are refused) and the CSRF token, then
//! redirects (303) back, with a notice for the next page in a cookie (shown once).

use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::Action;
use jobs_core::driver::{JobCountParams, JobGetParams, QueueSetPausedParams, ScheduleSetEnabledParams};

use crate::access::{self, Access};
use crate::audit::AuditEvent;
use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::params;
use crate::queue_settings;
use crate::view::{self, PageCtx, count_label};

/// Jobs changed per statement by a bulk action on a filter.
const BULK_BATCH: i64 = 500;

fn parse_action(s: &str) -> Result<Action, DashboardError> {
    Action::parse(s).ok_or_else(|| DashboardError::BadRequest(format!("unknown action `{s}`")))
}

/// Checks access and CSRF for a POST and returns its fields.
pub(crate) fn authorize_post(
    req: &HttpRequest,
    d: &Dashboard,
    body: &Bytes,
) -> Result<Vec<(String, String)>, DashboardError> {
    match d.config.auth.authorize(req) {
        Access::Denied => return Err(DashboardError::Denied),
        Access::ReadOnly => return Err(DashboardError::ReadOnly),
        Access::Full => {}
    }
    let fields = params::pairs(body);
    if !access::csrf_ok(req, params::value(&fields, "csrf")) {
        return Err(DashboardError::Csrf);
    }
    Ok(fields)
}

/// Tells the audit hook what was done.
pub(crate) fn audit(req: &HttpRequest, d: &Dashboard, action: &'static str, target: String, changed: i64) {
    d.config.audit.record(req, &AuditEvent { action, target, changed });
}

/// The audit name of a job action on one job (`job.retry`) or many (`jobs.retry`).
fn audit_name(action: Action, many: bool) -> &'static str {
    match (action, many) {
        (Action::Retry, false) => "job.retry",
        (Action::Cancel, false) => "job.cancel",
        (Action::Delete, false) => "job.delete",
        (Action::Retry, true) => "jobs.retry",
        (Action::Cancel, true) => "jobs.cancel",
        (Action::Delete, true) => "jobs.delete",
    }
}

/// Whether `target` is a path inside the dashboard: not `//host` or `/\host` (browsers read
/// both as another host), no backslash, no scheme, no control character.
fn inside(d: &Dashboard, target: &str) -> bool {
    target.starts_with(&format!("{}/", d.base))
        && !target.starts_with("//")
        && !target.contains('\\')
        && !target.contains("://")
        && !target.chars().any(char::is_control)
}

/// Redirects to `return_to` when it points inside the dashboard, else to `fallback`.
pub(crate) fn back(
    d: &Dashboard,
    fields: &[(String, String)],
    fallback: String,
    notice: &str,
) -> HttpResponse {
    let target =
        params::value(fields, "return_to").filter(|t| inside(d, t)).map(str::to_owned).unwrap_or(fallback);
    HttpResponse::SeeOther().insert_header(("location", target)).cookie(view::flash(&d.base, notice)).finish()
}

/// `POST /jobs/{id}/{action}`.
pub(crate) async fn one(
    req: HttpRequest,
    d: web::Data<Dashboard>,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, DashboardError> {
    let fields = authorize_post(&req, &d, &body)?;
    let (id, action) = path.into_inner();
    let id: i64 = id.parse().map_err(|_| DashboardError::BadRequest(format!("`{id}` is not a job id")))?;
    let action = parse_action(&action)?;
    let driver = &*d.config.driver;
    if driver.job_get(JobGetParams { id }).await?.is_none() {
        return Err(DashboardError::NotFound(format!("job {id}")));
    }
    let applied = action.apply(driver, &[id]).await?;
    let n = applied.changed;
    audit(&req, &d, audit_name(action, false), format!("job {id}"), n);
    let notice = if n == 1 {
        format!("job {id} {}", action.past())
    } else if !applied.key_held.is_empty() {
        format!(
            "job {id} was not retried: another job holds its uniqueness key (retry it once that one has finished)"
        )
    } else {
        format!("job {id} was not {} (it is running or already finished)", action.past())
    };
    let fallback = if action == Action::Delete && n == 1 {
        format!("{}/jobs", d.base)
    } else {
        format!("{}/jobs/{id}", d.base)
    };
    Ok(back(&d, &fields, fallback, &notice))
}

#[derive(Template)]
#[template(path = "confirm.html")]
struct Confirm {
    c: PageCtx,
    action: &'static str,
    /// "12 selected jobs", "~41,000 jobs matching the current filter".
    what: String,
    /// Where "Cancel" goes.
    back: String,
    /// The fields to post again, with `confirmed` added by the form.
    fields: Vec<(String, String)>,
}

/// `POST /jobs/bulk`: `action`, and either `scope=selected` with `id` fields, or
/// `scope=all` with the filter's fields. Deleting a selection and anything on a whole
/// filter first shows a confirmation; posted again with `confirmed`, it acts. A
/// filter's confirmation pins the newest matching job (`through`), so jobs enqueued
/// after it are not touched.
pub(crate) async fn bulk(
    req: HttpRequest,
    d: web::Data<Dashboard>,
    body: Bytes,
) -> Result<HttpResponse, DashboardError> {
    let fields = authorize_post(&req, &d, &body)?;
    let action = parse_action(params::value(&fields, "action").unwrap_or(""))?;
    let driver = &*d.config.driver;
    let confirmed = params::value(&fields, "confirmed").is_some();
    let back_to = params::value(&fields, "return_to").unwrap_or("").to_owned();
    match params::value(&fields, "scope").unwrap_or("selected") {
        "selected" => {
            let ids = params::ids(&fields, "id")?;
            if ids.is_empty() {
                return Err(DashboardError::BadRequest("no jobs selected".into()));
            }
            if ids.len() > 10_000 {
                return Err(DashboardError::BadRequest("select at most 10,000 jobs at once".into()));
            }
            if action == Action::Delete && !confirmed {
                let what = format!("{} selected jobs", view::thousands(ids.len() as i64));
                return confirm(&req, &d, action, what, back_to, fields);
            }
            let applied = action.apply(driver, &ids).await?;
            let n = applied.changed;
            audit(&req, &d, audit_name(action, true), format!("{} selected jobs", ids.len()), n);
            let notice =
                format!("{n} of {} selected jobs {}{}", ids.len(), action.past(), applied.held_note());
            Ok(back(&d, &fields, format!("{}/jobs", d.base), &notice))
        }
        "all" => {
            let filter = params::filter(&fields, d.config.can_search())?;
            let list = format!("{}/jobs?{}", d.base, params::query_string(&filter));
            if !confirmed {
                let count = driver.job_count(JobCountParams { filter: &filter, cap: 100_000 }).await?;
                let mut fields: Vec<_> = fields.into_iter().filter(|(k, _)| k != "through").collect();
                if let Some(newest) = Action::newest_matching(driver, &filter).await? {
                    fields.push(("through".into(), newest.to_string()));
                }
                let what = format!("{} jobs matching the current filter", count_label(count));
                return confirm(&req, &d, action, what, list, fields);
            }
            let through = params::id(&fields, "through")?;
            if through.is_none() {
                let notice = format!("no job matched, so none was {}", action.past());
                return Ok(back(&d, &fields, list, &notice));
            }
            let applied = action.apply_to_matching_through(driver, &filter, through, BULK_BATCH).await?;
            let total = applied.changed;
            let target =
                format!("jobs matching {} up to id {}", params::query_string(&filter), through.unwrap_or(0));
            audit(&req, &d, audit_name(action, true), target, total);
            let notice =
                format!("{} matching jobs {}{}", view::thousands(total), action.past(), applied.held_note());
            Ok(back(&d, &fields, list, &notice))
        }
        other => Err(DashboardError::BadRequest(format!("unknown scope `{other}`"))),
    }
}

fn confirm(
    req: &HttpRequest,
    d: &web::Data<Dashboard>,
    action: Action,
    what: String,
    back_to: String,
    fields: Vec<(String, String)>,
) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(req, d, "jobs")?;
    let cookies = c.take_cookies();
    let back = if inside(d, &back_to) { back_to } else { format!("{}/jobs", d.base) };
    let page = Confirm {
        c,
        action: action.verb(),
        what,
        back,
        fields: fields.into_iter().filter(|(k, _)| k != "csrf" && k != "confirmed").collect(),
    };
    view::respond(&page, cookies)
}

/// `POST /queues/{name}/pause|resume|concurrency|limits`.
pub(crate) async fn queue(
    req: HttpRequest,
    d: web::Data<Dashboard>,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, DashboardError> {
    let fields = authorize_post(&req, &d, &body)?;
    let (name, action) = path.into_inner();
    jobs_core::validate_queue(&name).map_err(|e| DashboardError::BadRequest(e.to_string()))?;
    let paused = match action.as_str() {
        "pause" => true,
        "resume" => false,
        "concurrency" | "limits" => {
            let applied = if action == "concurrency" {
                queue_settings::concurrency(&d, &name, &fields).await?
            } else {
                queue_settings::limits(&d, &name, &fields).await?
            };
            audit(&req, &d, applied.action, applied.target, 1);
            return Ok(back(&d, &fields, format!("{}/queues", d.base), &applied.notice));
        }
        other => return Err(DashboardError::BadRequest(format!("unknown queue action `{other}`"))),
    };
    let params = QueueSetPausedParams { queue: &name, paused };
    d.config.driver.queue_set_paused(params).await?;
    audit(&req, &d, if paused { "queue.pause" } else { "queue.resume" }, format!("queue {name}"), 1);
    let notice = format!("queue {name} {}", if paused { "paused" } else { "resumed" });
    Ok(back(&d, &fields, format!("{}/queues", d.base), &notice))
}

/// `POST /cron/{name}/enable|disable|run`.
pub(crate) async fn schedule(
    req: HttpRequest,
    d: web::Data<Dashboard>,
    path: web::Path<(String, String)>,
    body: Bytes,
) -> Result<HttpResponse, DashboardError> {
    let fields = authorize_post(&req, &d, &body)?;
    let (name, action) = path.into_inner();
    let driver = &*d.config.driver;
    let notice = match action.as_str() {
        "enable" | "disable" => {
            let enabled = action == "enable";
            let params = ScheduleSetEnabledParams { name: &name, enabled };
            if !driver.schedule_set_enabled(params).await? {
                return Err(DashboardError::NotFound(format!("schedule {name}")));
            }
            let what = if enabled { "schedule.enable" } else { "schedule.disable" };
            audit(&req, &d, what, format!("schedule {name}"), 1);
            format!("schedule {name} {}", if enabled { "enabled" } else { "disabled" })
        }
        "run" => match jobs_core::cron::run_now(driver, &name).await? {
            Some(job) => {
                audit(&req, &d, "schedule.run", format!("schedule {name}: job {}", job.id), 1);
                format!("schedule {name} enqueued job {}", job.id)
            }
            None => return Err(DashboardError::NotFound(format!("schedule {name}"))),
        },
        other => return Err(DashboardError::BadRequest(format!("unknown schedule action `{other}`"))),
    };
    Ok(back(&d, &fields, format!("{}/cron", d.base), &notice))
}
