//! The overview: counts by state and queue, throughput over an hour, day or week, queue latency,
//! live nodes.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{
    JobCountParams, JobState, NodeListParams, NodeRow, QueueDepth, QueueListDepthsParams, ServerStatusParams,
};
use jobs_core::{Count, JobFilter};

use super::chart::{self, Chart, Window};
use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::liveness::{self, QueueLine};
use crate::view::{self, PageCtx, filters, human_duration};

/// Counts above this are estimated.
pub(crate) const COUNT_CAP: i64 = 10_000;

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    c: PageCtx,
    states: Vec<(&'static str, Count)>,
    queues: Vec<QueueLine>,
    chart: Chart,
    windows: [Window; 3],
    nodes: Vec<NodeRow>,
    now: chrono::DateTime<chrono::Utc>,
    /// The replica pages read from, and how far behind it is (`None`: the primary).
    replica: Option<(String, String)>,
}

impl Overview {
    fn latency(&self, q: &QueueDepth) -> String {
        // (A queue's latency: how long its oldest available job has waited.)
        q.oldest_available_secs.map_or_else(|| "–".to_owned(), human_duration)
    }

    fn is_live(&self, n: &NodeRow) -> bool {
        liveness::is_live(n, self.now)
    }

    fn seen_ago(&self, n: &NodeRow) -> String {
        human_duration((self.now - n.heartbeat_at).num_milliseconds().max(0) as f64 / 1000.0)
    }
}

pub(crate) async fn redirect_to_slash(d: web::Data<Dashboard>) -> HttpResponse {
    HttpResponse::PermanentRedirect().insert_header(("location", format!("{}/", d.base))).finish()
}

pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "overview")?;
    let driver = d.config.reads();
    let depths = driver.queue_list_depths(QueueListDepthsParams {}).await?;
    // The states a job waits or runs in are counted exactly per queue (the table below
    // shows the same numbers); the finished ones exactly up to COUNT_CAP, estimated past it.
    let mut states = Vec::with_capacity(JobState::ALL.len());
    for state in JobState::ALL {
        let waiting = |f: fn(&QueueDepth) -> i64| Count::Exact(depths.iter().map(f).sum());
        let count = match state {
            JobState::Available => waiting(|q| q.available),
            JobState::Scheduled => waiting(|q| q.scheduled),
            JobState::Running => waiting(|q| q.running),
            JobState::Retryable => waiting(|q| q.retryable),
            JobState::Completed | JobState::Discarded | JobState::Cancelled => {
                let filter = JobFilter { states: vec![state], ..JobFilter::default() };
                driver.job_count(JobCountParams { filter: &filter, cap: COUNT_CAP }).await?
            }
        };
        states.push((state.as_str(), count));
    }
    let pairs = crate::params::pairs(req.query_string().as_bytes());
    let window = Window::parse(crate::params::value(&pairs, "chart"))?;
    let buckets = driver.stats_throughput(window.params()).await?;
    let now = chrono::Utc::now();
    let nodes = driver.node_list(NodeListParams {}).await?;
    let queues = liveness::queue_lines(depths, &nodes, now);
    let replica = match &d.config.replica {
        Some(replica) => {
            let status = replica.server_status(ServerStatusParams {}).await?;
            let lag = match (status.replica_lag, status.read_only) {
                (Some(lag), _) => format!("{} behind the primary", human_duration(lag.as_secs_f64())),
                (None, true) => "how far behind the primary is unknown (not streaming)".to_owned(),
                (None, false) => "not a replica: it takes writes".to_owned(),
            };
            Some((status.version, lag))
        }
        None => None,
    };
    let cookies = c.take_cookies();
    let page = Overview {
        states,
        queues,
        chart: chart::chart(window, &buckets),
        windows: Window::ALL,
        nodes,
        now,
        replica,
        c,
    };
    view::respond(&page, cookies)
}
