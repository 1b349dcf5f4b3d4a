//! The audit hook: every action the dashboard takes calls a function of yours with the
//! request (so you can tell who: your session, a header, a client certificate) and what
//! it did.
//!
//! ```
//! use jobs_dashboard::{AuditEvent, DashboardConfig};
//! # fn config(pool: jobs_core::postgres::Pool) -> DashboardConfig {
//! DashboardConfig::new(pool).on_action(|req: &actix_web::HttpRequest, event: &AuditEvent| {
//!     let who = req.headers().get("x-user").and_then(|v| v.to_str().ok()).unwrap_or("unknown");
//!     tracing::info!(who, action = event.action, target = %event.target, changed = event.changed, "dashboard action");
//! })
//! # }
//! ```

use std::sync::Arc;

use actix_web::HttpRequest;

/// What an action did, after it did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// What was done: `job.retry` (also "run now" on a scheduled job), `job.cancel`,
    /// `job.delete`, `jobs.retry` / `jobs.cancel` / `jobs.delete` (a selection or a
    /// filter), `job.enqueue`, `queue.pause`, `queue.resume`, `queue.limit`,
    /// `schedule.enable`, `schedule.disable`, `schedule.run`.
    pub action: &'static str,
    /// What it was done to: `job 42`, `12 selected jobs`, the filter's query string
    /// (`state=discarded&queue=mail`), `queue mailers`, `schedule nightly`.
    pub target: String,
    /// How many jobs (or queues, schedules) it changed: 0 when it changed nothing (a job
    /// already finished, say).
    pub changed: i64,
}

/// Receives every [`AuditEvent`]. Implemented for any `Fn(&HttpRequest, &AuditEvent)`.
pub trait Audit: Send + Sync + 'static {
    /// Called once per action, after it is applied, before the response is sent.
    fn record(&self, req: &HttpRequest, event: &AuditEvent);
}

impl<F> Audit for F
where
    F: Fn(&HttpRequest, &AuditEvent) + Send + Sync + 'static,
{
    fn record(&self, req: &HttpRequest, event: &AuditEvent) {
        self(req, event)
    }
}

/// The default: actions are logged (`tracing`, target `jobs_dashboard::audit`, at info),
/// with the request's peer address.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogActions;

impl Audit for LogActions {
    fn record(&self, req: &HttpRequest, event: &AuditEvent) {
        let peer = req.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!(target: "jobs_dashboard::audit", peer, action = event.action, target_ = %event.target, changed = event.changed, "dashboard action");
    }
}

pub(crate) type SharedAudit = Arc<dyn Audit>;
