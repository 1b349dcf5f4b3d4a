//! One job: arguments, metadata, result, every attempt's error with its backtrace, a
//! timeline, and for a workflow's step or a batch's member, its workflow (a link to its
//! members) and what it waits for.

use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use chrono::{DateTime, Utc};
use jobs_core::JobRow;
use jobs_core::driver::{Dependency, JobDependenciesParams, JobGetParams};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::view::{self, PageCtx, filters};

/// One failed attempt, from the job's `errors`.
pub(crate) struct AttemptError {
    pub(crate) attempt: i64,
    pub(crate) at: String,
    pub(crate) node: String,
    pub(crate) error_type: String,
    pub(crate) message: String,
    pub(crate) backtrace: Option<String>,
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    c: PageCtx,
    job: JobRow,
    args: String,
    meta: String,
    result: Option<String>,
    errors: Vec<AttemptError>,
    timeline: Vec<super::timeline::Event>,
    /// The nodes that claimed it, each once, in order, with how many times.
    nodes: Vec<(String, usize)>,
    retryable: bool,
    cancellable: bool,
    deletable: bool,
    /// The live nodes that run the job's queue and know its kind (for waiting jobs).
    runnable_on: Option<Vec<String>>,
    /// The jobs it depends on, each with what it needs and how that one ended.
    dependencies: Vec<Dependency>,
}

/// The live nodes that can run `job`: they serve its queue and registered its kind.
async fn runnable_on(d: &Dashboard, job: &JobRow) -> Result<Vec<String>, DashboardError> {
    let nodes = d.config.reads().node_list(jobs_core::driver::NodeListParams {}).await?;
    let now = Utc::now();
    Ok(nodes
        .into_iter()
        .filter(|n| crate::liveness::is_live(n, now) && n.can_run(&job.queue, &job.kind))
        .map(|n| n.name)
        .collect())
}

/// Each node of `attempted_by` once, in the order it first claimed the job, with how many
/// times it did.
fn nodes(attempted_by: &[String]) -> Vec<(String, usize)> {
    let mut nodes: Vec<(String, usize)> = Vec::new();
    for node in attempted_by {
        match nodes.iter_mut().find(|(n, _)| n == node) {
            Some((_, runs)) => *runs += 1,
            None => nodes.push((node.clone(), 1)),
        }
    }
    nodes
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn parse_time(v: Option<&serde_json::Value>) -> Option<DateTime<Utc>> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
}

pub(crate) async fn page(
    req: HttpRequest,
    d: web::Data<Dashboard>,
    path: web::Path<String>,
) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(&req, &d, "jobs")?;
    let id: i64 =
        path.parse().map_err(|_| DashboardError::BadRequest(format!("`{path}` is not a job id")))?;
    let job = d
        .config
        .reads()
        .job_get(JobGetParams { id })
        .await?
        .ok_or_else(|| DashboardError::NotFound(format!("job {id}")))?;
    let errors = job
        .failures()
        .map(|e| AttemptError {
            attempt: e.get("attempt").and_then(|a| a.as_i64()).unwrap_or(0),
            at: parse_time(e.get("at")).map(|t| view::time(&t)).unwrap_or_default(),
            node: e.get("node").and_then(|n| n.as_str()).unwrap_or("").to_owned(),
            error_type: e.get("error_type").and_then(|t| t.as_str()).unwrap_or("").to_owned(),
            message: e.get("message").and_then(|m| m.as_str()).unwrap_or("").to_owned(),
            backtrace: e.get("backtrace").and_then(|b| b.as_str()).map(str::to_owned),
        })
        .collect();
    let waiting = matches!(
        job.state,
        jobs_core::JobState::Available | jobs_core::JobState::Scheduled | jobs_core::JobState::Retryable
    );
    let runnable_on = if waiting { Some(runnable_on(&d, &job).await?) } else { None };
    let dependencies = if job.workflow_id.is_some() {
        d.config.reads().job_dependencies(JobDependenciesParams { job_id: id }).await?
    } else {
        Vec::new()
    };
    let cookies = c.take_cookies();
    let running = job.state == jobs_core::JobState::Running;
    // A pending job waits for its dependencies: a retry does not skip them.
    let pending = job.state == jobs_core::JobState::Pending;
    let page = JobPage {
        args: pretty(&job.args),
        meta: pretty(&job.meta),
        result: job.result.as_ref().map(pretty),
        errors,
        timeline: super::timeline::events(&job, Utc::now()),
        nodes: nodes(&job.attempted_by),
        retryable: !running && !pending,
        cancellable: !job.state.is_final(),
        deletable: !running,
        runnable_on,
        dependencies,
        job,
        c,
    };
    view::respond(&page, cookies)
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_node_once_with_its_claims() {
        let claimed: Vec<String> = ["a", "b", "a", "a"].map(str::to_owned).to_vec();
        assert_eq!(super::nodes(&claimed), vec![("a".to_owned(), 3), ("b".to_owned(), 1)]);
    }
}
