//! Error pages in the dashboard's own layout: a middleware on every route turns an error
//! response (a bad filter, a job that is gone, a database that is down, an actix
//! extractor's refusal) into a page with the navigation, a plain explanation and a way
//! back, keeping its status code.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use crate::config::Dashboard;
use crate::error::{DashboardError, REFERENCE_HEADER, with_reference};
use crate::view::{self, PageCtx};

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    c: PageCtx,
    status: u16,
    reason: &'static str,
    heading: &'static str,
    message: String,
    hint: &'static str,
}

/// A heading and a hint for each kind of failure.
fn wording(status: StatusCode) -> (&'static str, &'static str) {
    match status {
        StatusCode::NOT_FOUND => {
            ("Not found", "It may have been deleted or pruned, or the link is mistyped.")
        }
        StatusCode::BAD_REQUEST => {
            ("That request could not be read", "Check the filter or form and try again.")
        }
        StatusCode::FORBIDDEN => {
            ("Not allowed", "Ask whoever runs this dashboard for access, or reload the page.")
        }
        StatusCode::SERVICE_UNAVAILABLE => (
            "The database is not answering",
            "Nothing was changed. The page will work again once the database is back; try again in a moment.",
        ),
        s if s.is_server_error() => {
            ("Something went wrong", "Nothing was changed. The error is in the server's log.")
        }
        _ => ("That did not work", "Go back and try again."),
    }
}

/// The page for `message` with `status`, in the layout when access allows it.
pub(crate) fn page(req: &HttpRequest, status: StatusCode, message: String) -> Option<HttpResponse> {
    let d = req.app_data::<web::Data<Dashboard>>()?;
    // A denied user sees the bare page: no navigation into what they cannot see.
    let mut c = PageCtx::new(req, d, "").ok()?;
    let (heading, hint) = wording(status);
    let cookies = c.take_cookies();
    let page = ErrorPage {
        c,
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("Error"),
        heading,
        message,
        hint,
    };
    let mut response = view::respond(&page, cookies).ok()?;
    *response.status_mut() = status;
    Some(response)
}

/// The middleware: error responses become [`page`]s.
pub(crate) async fn errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let res = next.call(req).await?;
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return Ok(res.map_into_boxed_body());
    }
    let reference = res.response().headers().get(REFERENCE_HEADER).cloned();
    let Some(message) = res.response().error().map(|e| match e.as_error::<DashboardError>() {
        Some(e) => with_reference(e.page_message(), reference.as_ref().and_then(|r| r.to_str().ok())),
        None => e.to_string(),
    }) else {
        return Ok(res.map_into_boxed_body());
    };
    let (req, res) = res.into_parts();
    match page(&req, status, message) {
        Some(mut friendly) => {
            if let Some(reference) = reference {
                friendly
                    .headers_mut()
                    .insert(actix_web::http::header::HeaderName::from_static(REFERENCE_HEADER), reference);
            }
            Ok(ServiceResponse::new(req, friendly))
        }
        None => Ok(ServiceResponse::new(req, res.map_into_boxed_body())),
    }
}
