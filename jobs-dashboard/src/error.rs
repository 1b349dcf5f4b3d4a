//! Errors, rendered as a page with a proper status (never a panic).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use askama::Template;

/// What can go wrong serving a dashboard request.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// A query parameter or form field is invalid.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The hook denied access.
    #[error("you do not have access to the jobs dashboard")]
    Denied,
    /// A read-only user tried to act.
    #[error("this dashboard is read-only for you")]
    ReadOnly,
    /// The form's CSRF token is missing or wrong.
    #[error("the form expired or did not come from this dashboard; reload the page and try again")]
    Csrf,
    /// No such job, queue or schedule.
    #[error("{0} not found")]
    NotFound(String),
    /// The database failed.
    #[error("database error: {0}")]
    Jobs(#[from] jobs_core::Error),
    /// A template failed to render.
    #[error("template error: {0}")]
    Template(#[from] askama::Error),
}

/// The response header that carries a server error's reference, which its log line and
/// its page both show.
pub(crate) const REFERENCE_HEADER: &str = "x-jobs-error-reference";

impl DashboardError {
    /// What the error page says, in the operator's terms: the database's and the template
    /// engine's own text go to the server's log (with the page's reference), never to the
    /// page.
    pub fn page_message(&self) -> String {
        match self {
            DashboardError::Jobs(e) if e.is_connection_error() => {
                "The jobs database cannot be reached.".to_owned()
            }
            DashboardError::Jobs(_) => "The jobs database could not answer this request.".to_owned(),
            DashboardError::Template(_) => "This page could not be drawn.".to_owned(),
            other => other.to_string(),
        }
    }
}

/// The page's message for a server error with `reference`.
pub(crate) fn with_reference(message: String, reference: Option<&str>) -> String {
    match reference {
        Some(r) => format!("{message} The server's log has the details under reference {r}."),
        None => message,
    }
}

/// A driver's error is the jobs crate's database error.
impl From<jobs_core::driver::DriverError> for DashboardError {
    fn from(e: jobs_core::driver::DriverError) -> Self {
        DashboardError::Jobs(e.into())
    }
}

/// The bare error page, for when the dashboard's layout cannot be used (see
/// [`crate::friendly`] for the page users normally see).
#[derive(Template)]
#[template(path = "error_bare.html")]
struct ErrorPage<'a> {
    status: u16,
    reason: &'a str,
    message: String,
}

impl ResponseError for DashboardError {
    fn status_code(&self) -> StatusCode {
        match self {
            DashboardError::BadRequest(_) => StatusCode::BAD_REQUEST,
            DashboardError::Denied | DashboardError::ReadOnly | DashboardError::Csrf => StatusCode::FORBIDDEN,
            DashboardError::NotFound(_) => StatusCode::NOT_FOUND,
            DashboardError::Jobs(e) if e.is_connection_error() => StatusCode::SERVICE_UNAVAILABLE,
            DashboardError::Jobs(_) | DashboardError::Template(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let reference = status.is_server_error().then(|| format!("{:08x}", rand::random::<u32>()));
        if let Some(reference) = &reference {
            tracing::error!(error = %self, reference = %reference, "dashboard request failed");
        }
        let message = with_reference(self.page_message(), reference.as_deref());
        let page = ErrorPage {
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or("Error"),
            message: message.clone(),
        };
        let body = page.render().unwrap_or_else(|_| format!("{} {message}", status.as_u16()));
        let mut response = HttpResponse::build(status);
        response.content_type("text/html; charset=utf-8");
        for header in crate::headers::PAGE_HEADERS {
            response.insert_header(header);
        }
        if let Some(reference) = reference {
            response.insert_header((REFERENCE_HEADER, reference));
        }
        response.body(body)
    }
}
