//! The overview: counts by state and queue, the last hour's throughput, queue latency,
//! live nodes.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::JobFilter;
use jobs_core::driver::{
    JobCountParams, JobState, NodeListParams, NodeRow, QueueDepth, QueueListDepthsParams, ServerStatusParams,
    StatsThroughputParams, Throughput,
};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::liveness::{self, QueueLine};
use crate::view::{self, PageCtx, count_label, filters, human_duration};

/// Counts above this are estimated.
pub(crate) const COUNT_CAP: i64 = 10_000;

/// One bar of the throughput chart (SVG units).
pub(crate) struct Bar {
    pub(crate) x: usize,
    pub(crate) ok_height: f64,
    pub(crate) failed_height: f64,
    pub(crate) title: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct Overview {
    c: PageCtx,
    states: Vec<(&'static str, String)>,
    queues: Vec<QueueLine>,
    bars: Vec<Bar>,
    finished_last_hour: i64,
    failed_last_hour: i64,
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

/// The chart's bars from per-minute counts, scaled to a 100-unit height: the tallest
/// minute (everything it drew, failed attempts that were retried included) is 100.
pub(crate) fn bars(minutes: &[Throughput]) -> Vec<Bar> {
    let max =
        minutes.iter().map(|m| m.completed + m.retried + m.discarded + m.cancelled).max().unwrap_or(0).max(1)
            as f64;
    minutes
        .iter()
        .enumerate()
        .map(|(i, m)| Bar {
            x: i * 10,
            ok_height: m.completed as f64 / max * 100.0,
            failed_height: (m.retried + m.discarded + m.cancelled) as f64 / max * 100.0,
            title: format!(
                "{}: {} completed, {} failed attempts retried, {} discarded, {} cancelled",
                m.minute.format("%H:%M"),
                m.completed,
                m.retried,
                m.discarded,
                m.cancelled
            ),
        })
        .collect()
}

pub(crate) async fn redirect_to_slash(d: web::Data<Dashboard>) -> HttpResponse {
    HttpResponse::PermanentRedirect().insert_header(("location", format!("{}/", d.base))).finish()
}

pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "overview")?;
    let driver = d.config.reads();
    let mut states = Vec::with_capacity(JobState::ALL.len());
    for state in JobState::ALL {
        let filter = JobFilter { states: vec![state], ..JobFilter::default() };
        let count = driver.job_count(JobCountParams { filter: &filter, cap: COUNT_CAP }).await?;
        states.push((state.as_str(), count_label(count)));
    }
    let depths = driver.queue_list_depths(QueueListDepthsParams {}).await?;
    let minutes = driver.stats_throughput(StatsThroughputParams {}).await?;
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
        finished_last_hour: minutes.iter().map(|m| m.completed).sum(),
        failed_last_hour: minutes.iter().map(|m| m.retried + m.discarded + m.cancelled).sum(),
        bars: bars(&minutes),
        nodes,
        now,
        replica,
        c,
    };
    view::respond(&page, cookies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_bar_is_taller_than_the_chart_when_retries_dominate() {
        let minute = |completed, retried| Throughput {
            minute: chrono::Utc::now(),
            completed,
            retried,
            discarded: 1,
            cancelled: 1,
        };
        // The tallest minute is made mostly of retried attempts (the chart overflowed
        // when its scale left them out).
        let bars = bars(&[minute(10, 0), minute(5, 400), minute(0, 0)]);
        for bar in &bars {
            assert!(
                bar.ok_height + bar.failed_height <= 100.0 + 1e-9,
                "{} + {}",
                bar.ok_height,
                bar.failed_height
            );
        }
        assert!(
            (bars[1].ok_height + bars[1].failed_height - 100.0).abs() < 1e-9,
            "the tallest fills the chart"
        );
        // 2 of the tallest minute's 407.
        assert!((bars[2].ok_height + bars[2].failed_height - 200.0 / 407.0).abs() < 1e-9);
    }
}
