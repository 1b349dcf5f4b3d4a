//! Queues: depth per state, why jobs wait, pause and resume, the settings for the whole
//! cluster (concurrency per node, global, per-key and rate limits), how much of the limits
//! is in use (with the busiest keys), and each node's concurrency in use.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::driver::{
    NodeListParams, QueueDepth, QueueLimitsUsageParams, QueueListDepthsParams, QueueSettings,
    QueueSettingsParams,
};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::limits_usage::{self, BUSIEST_KEYS, LimitsLine, WAITING_CAP};
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
    /// What is stored for the cluster, by queue.
    settings: HashMap<String, QueueSettings>,
    /// Why each queue's jobs wait (none listed: nothing waits).
    waiting: HashMap<String, Vec<String>>,
    /// How much of each limited queue's limits is in use.
    limits: Vec<LimitsLine>,
    /// The largest concurrency or global limit that may be set.
    max: i32,
    /// The largest rate that may be set.
    max_rate: u32,
    /// The most waiting jobs counted per busy key.
    limits_cap: i64,
}

/// One choice of the rate's period.
struct PeriodOption {
    secs: i64,
    label: String,
    /// ` selected` for the stored period, else empty.
    selected: &'static str,
}

impl QueuesPage {
    /// The concurrency per node set for the cluster.
    fn cluster_limit(&self, queue: &str) -> Option<i64> {
        self.settings.get(queue).and_then(|s| s.concurrency)
    }

    /// At most this many running across the cluster.
    fn global_limit(&self, queue: &str) -> Option<i64> {
        self.settings.get(queue).and_then(|s| s.global_limit)
    }

    /// At most this many running per partition key, across the cluster.
    fn per_key_limit(&self, queue: &str) -> Option<i64> {
        self.settings.get(queue).and_then(|s| s.per_key_limit)
    }

    /// The periods a rate (the queue's, or with `per_key` its rate per key) may have, the
    /// stored one selected (offered too if it is not one of the usual ones: it was set
    /// through the API).
    fn period_options(&self, queue: &str, per_key: bool) -> Vec<PeriodOption> {
        let rate = if per_key { self.per_key_rate(queue) } else { self.rate(queue) };
        let stored = rate.map(|(_, period, _)| period);
        let mut options: Vec<PeriodOption> = crate::queue_settings::RATE_PERIODS
            .iter()
            .map(|&(secs, name)| PeriodOption {
                secs,
                label: format!("per {name}"),
                // With no rate stored, a number typed alone means so many a minute.
                selected: if stored.unwrap_or(60) == secs { " selected" } else { "" },
            })
            .collect();
        if let Some(period) = stored.filter(|p| !options.iter().any(|o| o.secs == *p)) {
            options.push(PeriodOption {
                secs: period,
                label: format!("per {period} s"),
                selected: " selected",
            });
        }
        options
    }

    /// The rate limit, if any: its jobs per period, its period in seconds, and in words.
    fn rate(&self, queue: &str) -> Option<(u32, i64, String)> {
        let rate = self.settings.get(queue)?.rate()?;
        Some((rate.allowed, i64::from(rate.period_secs), crate::queue_settings::describe_rate(rate)))
    }

    /// The rate limit per key, if any, as [`Self::rate`].
    fn per_key_rate(&self, queue: &str) -> Option<(u32, i64, String)> {
        let rate = self.settings.get(queue)?.per_key_rate()?;
        Some((rate.allowed, i64::from(rate.period_secs), crate::queue_settings::describe_rate(rate)))
    }

    /// Why `queue`'s jobs wait.
    fn why_waiting(&self, queue: &str) -> &[String] {
        self.waiting.get(queue).map_or(&[], Vec::as_slice)
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
    // What each live node serving a queue declares for it (`None`: nothing), applied
    // where no limit is stored.
    let mut declared: HashMap<String, Vec<Option<serde_json::Value>>> = HashMap::new();
    for node in nodes.into_iter().filter(|n| liveness::is_live(n, now)) {
        if let Some(map) = node.queues.as_object() {
            for (queue, v) in map {
                declared.entry(queue.clone()).or_default().push(v.get("declared").cloned());
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
    let settings: HashMap<String, QueueSettings> = driver
        .queue_settings(QueueSettingsParams { queue: None })
        .await?
        .into_iter()
        .map(|s| (s.queue.clone(), s))
        .collect();
    let (mut waiting, mut limits) = (HashMap::new(), Vec::new());
    for line in &queues {
        let depth = &line.depth;
        let by_node = declared.get(&depth.queue).map_or(&[][..], Vec::as_slice);
        let (in_force, from_node) = limits_usage::in_force(&depth.queue, settings.get(&depth.queue), by_node);
        let used = if in_force.limited() {
            let params = QueueLimitsUsageParams {
                queue: &depth.queue,
                per_key_limit: in_force.per_key_limit,
                top: BUSIEST_KEYS,
                cap: WAITING_CAP,
            };
            // A failed read leaves this queue's usage out, saying so, not the page (its pause
            // button).
            match driver.queue_limits_usage(params).await {
                Ok(used) => Some(used),
                Err(e) => {
                    tracing::warn!(queue = %depth.queue, error = %e, "reading the limits' usage failed");
                    limits.push(LimitsLine::unreadable(&depth.queue, from_node));
                    None
                }
            }
        } else {
            None
        };
        waiting.insert(
            depth.queue.clone(),
            limits_usage::why_waiting(depth, Some(&in_force), used.as_ref(), now),
        );
        if let Some(used) = &used {
            limits.push(LimitsLine::new(depth, &in_force, from_node, used, now));
        }
    }
    let cookies = c.take_cookies();
    let page = QueuesPage {
        c,
        queues,
        usage,
        settings,
        waiting,
        limits,
        max: jobs_core::driver::validation::MAX_CONCURRENCY,
        max_rate: jobs_core::driver::MAX_RATE_ALLOWED,
        limits_cap: WAITING_CAP,
    };
    view::respond(&page, cookies)
}
