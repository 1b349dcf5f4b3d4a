//! The dashboard's pages, one module each.

pub(crate) mod cron;
pub(crate) mod job;
pub(crate) mod jobs;
pub(crate) mod overview;
pub(crate) mod queues;

use crate::error::DashboardError;

/// Any other path under the dashboard.
pub(crate) async fn not_found() -> Result<actix_web::HttpResponse, DashboardError> {
    Err(DashboardError::NotFound("page".into()))
}
