//! Queues: depth per state, pause and resume, and each node's concurrency in use.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{NodeListParams, QueueDepth, QueueListDepthsParams};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::view::{self, PageCtx, human_duration};

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
    queues: Vec<QueueDepth>,
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
    let queues = driver.queue_list_depths(QueueListDepthsParams {}).await?;
    let mut usage = Vec::new();
    for node in driver.node_list(NodeListParams {}).await? {
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
    let cookie = c.take_cookie();
    view::respond(&QueuesPage { c, queues, usage }, cookie)
}
