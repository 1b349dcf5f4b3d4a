//! The jobs list: filters, search, keyset pagination (newest first), capped counts, and
//! the bulk-action form.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{
    Capability, Driver, INDEXED_SEARCH_STATES, JobCountParams, JobListParams, JobOrder, OnFailure,
    WorkflowGetParams, WorkflowInfo,
};
use jobs_core::{Action, Count, JobFilter, JobRow, JobState};

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
    /// How `count` was counted (its tooltip).
    count_title: &'static str,
    rows: Vec<JobRow>,
    next_before: Option<i64>,
    first_page: bool,
    /// For a search read a window at a time: how far it read.
    searched: Option<Searched>,
    /// With a `workflow` filter: its members, how many finished of how many.
    workflow: Option<Progress>,
}

/// A workflow's or batch's heading: what it is, its name and setting, and its progress
/// (members finished, of all its members).
pub(crate) struct Progress {
    pub(crate) id: i64,
    /// "Workflow" or "Batch".
    pub(crate) what: &'static str,
    /// The name it was enqueued with (`None`: no such row, or pruned with its members).
    pub(crate) name: Option<String>,
    /// Its setting: what a failure does (a workflow), or whether it is sealed (a batch).
    pub(crate) note: &'static str,
    pub(crate) finished: String,
    pub(crate) total: String,
}

/// The heading of workflow `id`: its row and two counts through the index of its
/// members, read at once where the driver reads in parallel (one after another on one
/// connection elsewhere).
async fn progress(driver: &dyn Driver, id: i64) -> Result<Progress, DashboardError> {
    let all = JobFilter { workflow: Some(id), ..JobFilter::default() };
    let finished = JobFilter { states: JobState::FINAL.to_vec(), ..all.clone() };
    let info = driver.workflow_get(WorkflowGetParams { id });
    let total = driver.job_count(JobCountParams { filter: &all, cap: COUNT_CAP });
    let finished = driver.job_count(JobCountParams { filter: &finished, cap: COUNT_CAP });
    let (info, total, finished) = if driver.capabilities().has(Capability::ParallelReads) {
        tokio::try_join!(info, total, finished)?
    } else {
        (info.await?, total.await?, finished.await?)
    };
    let (what, note) = match &info {
        Some(WorkflowInfo { callback_id: Some(_), sealed: true, .. }) => {
            ("Batch", "sealed: its callback runs once every member finished")
        }
        Some(WorkflowInfo { callback_id: Some(_), .. }) => {
            ("Batch", "open: members may still join; its callback waits for the seal")
        }
        Some(WorkflowInfo { on_failure: OnFailure::Cancel, .. }) => {
            ("Workflow", "a failed step cancels what waits for it")
        }
        Some(WorkflowInfo { on_failure: OnFailure::Hold, .. }) => {
            ("Workflow", "a failed step holds what waits for it for a person")
        }
        None => ("Workflow", "not found: it never existed, or went with its last member"),
    };
    Ok(Progress {
        id,
        what,
        name: info.map(|i| i.name),
        note,
        finished: count_label(finished),
        total: count_label(total),
    })
}

impl JobsPage {
    fn oldest_first(&self) -> bool {
        self.filter.order == JobOrder::OldestFirst
    }

    /// The list's query string in the other id order (the sortable id column's link).
    fn resorted(&self) -> String {
        let order = if self.filter.order == JobOrder::NewestFirst {
            JobOrder::OldestFirst
        } else {
            JobOrder::NewestFirst
        };
        self.sorted(order)
    }

    /// The link to the next page.
    fn next_label(&self) -> &'static str {
        match self.filter.order {
            JobOrder::NewestFirst => "older",
            JobOrder::OldestFirst => "newer",
            JobOrder::DueSoonest | JobOrder::RecentlyFinished => "next",
        }
    }

    /// The link back to the first page.
    fn first_label(&self) -> &'static str {
        match self.filter.order {
            JobOrder::NewestFirst => "newest",
            JobOrder::OldestFirst => "oldest",
            JobOrder::DueSoonest | JobOrder::RecentlyFinished => "first",
        }
    }

    /// The list's query string in `order`.
    fn sorted(&self, order: JobOrder) -> String {
        params::query_string(&JobFilter { order, ..self.filter.clone() })
    }

    /// The time orders an index serves for the states shown: (label, query string, chosen).
    /// None while a window of ids is read, newest first (a search, or a tag without an
    /// index).
    fn time_sorts(&self) -> Vec<(&'static str, String, bool)> {
        if self.searched.is_some() {
            return Vec::new();
        }
        [(JobOrder::DueSoonest, "due soonest"), (JobOrder::RecentlyFinished, "recently finished")]
            .into_iter()
            .filter(|(order, _)| order.served_for(&self.filter.states))
            .map(|(order, label)| (label, self.sorted(order), self.filter.order == order))
            .collect()
    }

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
        let message = row
            .failures()
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
            .unwrap_or_default();
        if row.state == JobState::Completed && !message.is_empty() {
            format!("recovered from: {message}")
        } else {
            message
        }
    }

    /// A completed job's earlier error is history, not a failure: shown muted.
    fn error_class(&self, row: &JobRow) -> &'static str {
        if row.state == JobState::Completed { "error-text recovered" } else { "error-text" }
    }
}

/// Ids one request of a search that no index serves reads: about 50 ms of scanning on
/// 2 cores (docs/benchmarks.md). "Search further" reads the next window.
pub(crate) const SEARCH_WINDOW: i64 = 100_000;

/// Why `filter` must be read by scanning (so a window of ids at a time), if it must: text
/// in errors always; arguments and metadata unless the driver indexes them and every state
/// searched is one its index covers; a tag unless the driver indexes tags (without an
/// index, counting one tenant of thousands reads every job).
fn scans(filter: &JobFilter, driver: &dyn Driver) -> Option<&'static str> {
    let capabilities = driver.capabilities();
    let indexed = capabilities.has(Capability::IndexedSearch)
        && !filter.states.is_empty()
        && filter.states.iter().all(|s| INDEXED_SEARCH_STATES.contains(s));
    if filter.error.is_some() || (filter.search.is_some() && !indexed) {
        Some("no index serves this search")
    } else if filter.tag.is_some() && !capabilities.has(Capability::IndexedTags) {
        Some("this database keeps no index of tags")
    } else {
        None
    }
}

/// How far a windowed search has read.
pub(crate) struct Searched {
    /// The ids read: `from..to`.
    pub(crate) from: i64,
    pub(crate) to: i64,
    /// Where "search further" starts (`None`: nothing older is left).
    pub(crate) further: Option<i64>,
    /// Why the filter is read a window at a time.
    pub(crate) why: &'static str,
}

pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "jobs")?;
    let pairs = params::pairs(req.query_string().as_bytes());
    // A job id in the search box opens that job (every backend can); digits that are no
    // job's id (an HTTP status in an error, say) are searched for as text.
    if let Some(id) = params::value(&pairs, "q").and_then(|q| q.trim_start_matches('#').parse::<i64>().ok())
        && d.config.reads().job_get(jobs_core::driver::JobGetParams { id }).await?.is_some()
    {
        return Ok(HttpResponse::SeeOther()
            .insert_header(("location", format!("{}/jobs/{id}", d.base)))
            .finish());
    }
    let can_search = d.config.can_search();
    let mut filter = params::filter(&pairs, can_search)?;
    let before = params::id(&pairs, "before")?;
    let driver = d.config.reads();
    let mut searched = None;
    let counted = if let Some(why) = scans(&filter, driver) {
        // A scan reads newest first (its window counts down from the newest id).
        filter.order = JobOrder::NewestFirst;
        // The newest jobs first, a window of ids at a time: never seconds on a big table.
        let top = match before {
            Some(before) => before,
            None => Action::newest_matching(driver, &JobFilter::default()).await?.map_or(1, |id| id + 1),
        };
        let from = top.saturating_sub(SEARCH_WINDOW).max(1);
        filter.id_at_least = Some(from);
        searched = Some(Searched { from, to: top, further: (from > 1).then_some(from), why });
        // Live refresh would re-run the scan every few seconds.
        c.live_off = Some("off while searching");
        false
    } else {
        true
    };
    let top = searched.as_ref().map(|s| s.to);
    let list = JobListParams { filter: &filter, before: before.or(top), limit: PAGE_SIZE + 1 };
    let count_all = JobCountParams { filter: &filter, cap: COUNT_CAP };
    // On a server the count and the page are read at once, on two connections (a count
    // can take as long as the page: up to its budget on Postgres); elsewhere the page is
    // read first, and a first page that holds every match is the count.
    let (mut rows, count) = if counted && driver.capabilities().has(Capability::ParallelReads) {
        let (rows, count) = tokio::try_join!(driver.job_list(list), driver.job_count(count_all))?;
        (rows, Some(count))
    } else {
        (driver.job_list(list).await?, None)
    };
    let next_before = if rows.len() as i64 > PAGE_SIZE {
        rows.truncate(PAGE_SIZE as usize);
        rows.last().map(|r| r.id)
    } else {
        None
    };
    let count = match (counted, before, next_before, count) {
        (false, ..) => None,
        // The first page holds every match: that is the count, exact (a rare filter's
        // count can cost more than its page).
        (true, None, None, _) => Some(Count::Exact(rows.len() as i64)),
        (true, _, _, Some(count)) => Some(count),
        (true, _, _, None) => Some(driver.job_count(count_all).await?),
    };
    // An estimate below what the first page holds (filters on columns that go together,
    // which the estimate takes as independent) says only that there are more; on later
    // pages it is at least this page's rows and the one after.
    let count = match count {
        Some(Count::Estimate(n)) if before.is_none() && n <= PAGE_SIZE => Some(Count::AtLeast(PAGE_SIZE)),
        Some(Count::Estimate(n)) => {
            Some(Count::Estimate(n.max(rows.len() as i64 + i64::from(next_before.is_some()))))
        }
        count => count,
    };
    filter.id_at_least = None;
    let workflow = match filter.workflow {
        Some(id) => Some(progress(driver, id).await?),
        None => None,
    };
    let cookies = c.take_cookies();
    let (count_title, count) = match count {
        Some(count) => (view::count_title(count), count_label(count)),
        None if next_before.is_some() => ("found among the ids searched", format!("{PAGE_SIZE}+ found")),
        None => ("found among the ids searched", format!("{} found", rows.len())),
    };
    let page = JobsPage {
        query: params::query_string(&filter),
        filter_fields: params::pairs(params::query_string(&filter).as_bytes()),
        search_text: filter
            .search
            .as_ref()
            .map(|s| s.to_string())
            .or_else(|| filter.error.clone())
            .unwrap_or_default(),
        from_text: filter.from.map(|t| t.format("%Y-%m-%dT%H:%M").to_string()).unwrap_or_default(),
        to_text: filter.to.map(|t| t.format("%Y-%m-%dT%H:%M").to_string()).unwrap_or_default(),
        filter,
        all_states: &JobState::ALL,
        count,
        count_title,
        rows,
        next_before,
        first_page: before.is_none(),
        can_search,
        searched,
        workflow,
        c,
    };
    view::respond(&page, cookies)
}
