//! The overview: counts by state and queue, throughput over an hour, day or week, queue latency,
//! live nodes.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{
    Capability, JobCountParams, JobState, NodeListParams, NodeRow, QueueDepth, QueueListDepthsParams,
    ServerStatusParams,
};
use jobs_core::{Count, JobFilter};

use super::chart::{self, Chart, Window};
use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::liveness::{self, QueueLine};
use crate::view::{self, PageCtx, filters, human_duration};

/// Pages count matching jobs exactly up to this many; past it they show the driver's
/// estimate, or "more than" where it has none.
pub const COUNT_CAP: i64 = 10_000;

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
    let pairs = crate::params::pairs(req.query_string().as_bytes());
    let window = Window::parse(crate::params::value(&pairs, "chart"))?;
    // The two long reads are independent: on a database server they run at once, on two
    // connections (on MariaDB at 1 M jobs, the queue depths and a week's chart took 130 ms
    // and 110 ms one after the other). The short ones follow, so that a page takes at most
    // two of the pool's connections, which workers may share.
    let (depths, buckets) = if driver.capabilities().has(Capability::ParallelReads) {
        tokio::try_join!(
            driver.queue_list_depths(QueueListDepthsParams {}),
            driver.stats_throughput(window.params()),
        )?
    } else {
        (
            driver.queue_list_depths(QueueListDepthsParams {}).await?,
            driver.stats_throughput(window.params()).await?,
        )
    };
    let counted = |state: JobState| async move {
        let filter = JobFilter { states: vec![state], ..JobFilter::default() };
        driver.job_count(JobCountParams { filter: &filter, cap: COUNT_CAP }).await
    };
    let pending = counted(JobState::Pending).await?;
    let completed = counted(JobState::Completed).await?;
    let discarded = counted(JobState::Discarded).await?;
    let cancelled = counted(JobState::Cancelled).await?;
    let nodes = driver.node_list(NodeListParams {}).await?;
    // The states a job waits or runs in are counted exactly per queue (the table below
    // shows the same numbers); pending and the finished ones exactly up to COUNT_CAP,
    // estimated past it.
    let waiting = |f: fn(&QueueDepth) -> i64| Count::Exact(depths.iter().map(f).sum());
    let states: Vec<(&'static str, Count)> = JobState::ALL
        .into_iter()
        .map(|state| {
            let count = match state {
                JobState::Pending => pending,
                JobState::Available => waiting(|q| q.available),
                JobState::Scheduled => waiting(|q| q.scheduled),
                JobState::Running => waiting(|q| q.running),
                JobState::Retryable => waiting(|q| q.retryable),
                JobState::Completed => completed,
                JobState::Discarded => discarded,
                JobState::Cancelled => cancelled,
            };
            (state.as_str(), count)
        })
        .collect();
    let now = chrono::Utc::now();
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
