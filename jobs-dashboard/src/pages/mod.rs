//! The dashboard's pages, one module each.

pub(crate) mod chart;
pub(crate) mod cron;
pub(crate) mod enqueue;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod kinds;
pub(crate) mod overview;
pub(crate) mod queues;
pub(crate) mod timeline;

use crate::error::DashboardError;

/// Any other path under the dashboard: the friendly 404 page.
pub(crate) async fn not_found(
    req: actix_web::HttpRequest,
) -> Result<actix_web::HttpResponse, DashboardError> {
    let error = DashboardError::NotFound(format!("page {}", req.path()));
    let status = actix_web::ResponseError::status_code(&error);
    crate::friendly::page(&req, status, error.to_string()).ok_or(error)
}
