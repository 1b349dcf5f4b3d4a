//! The jobs list: filters, search, keyset pagination (newest first), capped counts, and
//! the bulk-action form.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{JobCountParams, JobListParams};
use jobs_core::{JobFilter, JobRow, JobState};

use super::overview::COUNT_CAP;
use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::params;
use crate::view::{self, PageCtx, count_label, filters};

/// Rows per page.
const PAGE_SIZE: i64 = 50;

#[derive(Template)]
#[template(path = "jobs.html")]
struct JobsPage {
    c: PageCtx,
    filter: JobFilter,
    query: String,
    filter_fields: Vec<(String, String)>,
    /// Whether the driver can search arguments and metadata (else no search box).
    can_search: bool,
    search_text: String,
    from_text: String,
    to_text: String,
    all_states: &'static [JobState],
    count: String,
    rows: Vec<JobRow>,
    next_before: Option<i64>,
    first_page: bool,
}

impl JobsPage {
    fn state_checked(&self, state: &JobState) -> bool {
        self.filter.states.contains(state)
    }

    fn args_preview(&self, row: &JobRow) -> String {
        let text = row.args.to_string();
        if text.chars().count() > 80 {
            format!("{}…", text.chars().take(80).collect::<String>())
        } else {
            text
        }
    }

    fn last_error(&self, row: &JobRow) -> String {
        row.failures()
            .last()
            .and_then(|e| e.get("message"))
            .and_then(|m| m.as_str())
            .map(|m| {
                if m.chars().count() > 80 {
                    format!("{}…", m.chars().take(80).collect::<String>())
                } else {
                    m.to_owned()
                }
            })
            .unwrap_or_default()
    }
}

pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "jobs")?;
    let pairs = params::pairs(req.query_string().as_bytes());
    // A job id in the search box opens that job (every backend can).
    if let Some(id) = params::value(&pairs, "q").and_then(|q| q.trim_start_matches('#').parse::<i64>().ok()) {
        return Ok(HttpResponse::SeeOther()
            .insert_header(("location", format!("{}/jobs/{id}", d.base)))
            .finish());
    }
    let can_search = d.config.can_search();
    let filter = params::filter(&pairs, can_search)?;
    let before = params::id(&pairs, "before")?;
    let driver = d.config.reads();
    let count = driver.job_count(JobCountParams { filter: &filter, cap: COUNT_CAP }).await?;
    let mut rows = driver.job_list(JobListParams { filter: &filter, before, limit: PAGE_SIZE + 1 }).await?;
    let next_before = if rows.len() as i64 > PAGE_SIZE {
        rows.truncate(PAGE_SIZE as usize);
        rows.last().map(|r| r.id)
    } else {
        None
    };
    let cookies = c.take_cookies();
    let page = JobsPage {
        query: params::query_string(&filter),
        filter_fields: params::pairs(params::query_string(&filter).as_bytes()),
        search_text: filter.search.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        from_text: filter.from.map(|t| t.format("%Y-%m-%dT%H:%M").to_string()).unwrap_or_default(),
        to_text: filter.to.map(|t| t.format("%Y-%m-%dT%H:%M").to_string()).unwrap_or_default(),
        filter,
        all_states: &JobState::ALL,
        count: count_label(count),
        rows,
        next_before,
        first_page: before.is_none(),
        can_search,
        c,
    };
    view::respond(&page, cookies)
}
