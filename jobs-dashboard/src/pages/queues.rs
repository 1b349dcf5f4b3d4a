//! Queues: depth per state, pause and resume, and each node's concurrency in use.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{NodeListParams, QueueDepth, QueueListDepthsParams};

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
}

impl QueuesPage {
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
    let cookies = c.take_cookies();
    view::respond(&QueuesPage { c, queues, usage }, cookies)
}
