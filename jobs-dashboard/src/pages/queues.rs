//! Queues: depth per state, pause and resume, and each node's concurrency in use.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{NodeListParams, QueueDepth, QueueListDepthsParams, QueueSettingsParams};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::liveness::{self, QueueLine};
use crate::view::{self, PageCtx, filters, human_duration};

/// One node's use of one queue.
pub(crate) struct NodeUse {
    pub(crate) node: String,
    pub(crate) queue: String,
    pub(crate) running: i64,
    /// Jobs it claimed ahead of a free slot (in the `running` state, not started).
    pub(crate) buffered: i64,
    pub(crate) limit: i64,
}

#[derive(Template)]
#[template(path = "queues.html")]
struct QueuesPage {
    c: PageCtx,
    queues: Vec<QueueLine>,
    usage: Vec<NodeUse>,
    /// The concurrency set for the cluster, by queue.
    cluster: std::collections::HashMap<String, i64>,
    /// The largest concurrency that may be set.
    max: i32,
}

impl QueuesPage {
    fn cluster_limit(&self, queue: &str) -> Option<i64> {
        self.cluster.get(queue).copied()
    }

    fn latency(&self, q: &QueueDepth) -> String {
        q.oldest_available_secs.map_or_else(|| "–".to_owned(), human_duration)
    }
}

pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "queues")?;
    let driver = d.config.reads();
    let depths = driver.queue_list_depths(QueueListDepthsParams {}).await?;
    let now = chrono::Utc::now();
    let nodes = driver.node_list(NodeListParams {}).await?;
    let queues = liveness::queue_lines(depths, &nodes, now);
    let mut usage = Vec::new();
    for node in nodes.into_iter().filter(|n| liveness::is_live(n, now)) {
        if let Some(map) = node.queues.as_object() {
            for (queue, v) in map {
                usage.push(NodeUse {
                    node: node.name.clone(),
                    queue: queue.clone(),
                    running: v.get("running").and_then(|r| r.as_i64()).unwrap_or(0),
                    buffered: v.get("buffered").and_then(|r| r.as_i64()).unwrap_or(0),
                    limit: v.get("limit").and_then(|r| r.as_i64()).unwrap_or(0),
                });
            }
        }
    }
    let cluster = driver
        .queue_settings(QueueSettingsParams { queue: None })
        .await?
        .into_iter()
        .filter_map(|s| s.concurrency.map(|n| (s.queue, n)))
        .collect();
    let cookies = c.take_cookies();
    let max = jobs_core::driver::validation::MAX_CONCURRENCY;
    view::respond(&QueuesPage { c, queues, usage, cluster, max }, cookies)
}
