//! Who may do what: the host application's authorization hook, and CSRF protection.

use std::sync::Arc;

use actix_web::HttpRequest;
use actix_web::cookie::{Cookie, SameSite};

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// See everything and act (retry, cancel, delete, pause, ...).
    Full,
    /// See everything; actions are hidden and refused.
    ReadOnly,
    /// Nothing: 403.
    Denied,
}

/// Decides, per request, what it may do. Implemented for any
/// `Fn(&HttpRequest) -> Access`, so a closure checking your session works:
///
/// ```
/// use jobs_dashboard::Access;
/// let hook = |req: &actix_web::HttpRequest| {
///     if req.headers().contains_key("x-admin") { Access::Full } else { Access::ReadOnly }
/// };
/// # let _ = jobs_dashboard::DashboardConfig::new(jobs_core::postgres::pool("postgres://localhost/x", 1).unwrap()).authorize(hook);
/// ```
pub trait Authorize: Send + Sync + 'static {
    /// The access granted to `req`.
    fn authorize(&self, req: &HttpRequest) -> Access;
}

impl<F> Authorize for F
where
    F: Fn(&HttpRequest) -> Access + Send + Sync + 'static,
{
    fn authorize(&self, req: &HttpRequest) -> Access {
        self(req)
    }
}

/// Grants everyone full access (the default; mount the dashboard behind your own auth).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authorize for AllowAll {
    fn authorize(&self, _req: &HttpRequest) -> Access {
        Access::Full
    }
}

pub(crate) type SharedAuthorize = Arc<dyn Authorize>;

/// The CSRF cookie's name. Every form carries the same value in a `csrf` field
/// (double-submit); the cookie is `SameSite=Strict` and `HttpOnly`.
pub(crate) const CSRF_COOKIE: &str = "jobs_dashboard_csrf";

/// The request's CSRF token, and a cookie to set when it had none.
pub(crate) fn csrf_token(req: &HttpRequest, path: &str) -> (String, Option<Cookie<'static>>) {
    if let Some(cookie) = req.cookie(CSRF_COOKIE)
        && cookie.value().len() == 64
        && cookie.value().chars().all(|c| c.is_ascii_hexdigit())
    {
        return (cookie.value().to_owned(), None);
    }
    let bytes: [u8; 32] = rand::random();
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let cookie = Cookie::build(CSRF_COOKIE, token.clone())
        .path(if path.is_empty() { "/".to_owned() } else { path.to_owned() })
        .http_only(true)
        .same_site(SameSite::Strict)
        .finish();
    (token, Some(cookie))
}

/// Whether a POST's `csrf` field matches its cookie (compared in constant time).
pub(crate) fn csrf_ok(req: &HttpRequest, submitted: Option<&str>) -> bool {
    let (Some(cookie), Some(submitted)) = (req.cookie(CSRF_COOKIE), submitted) else {
        return false;
    };
    let (a, b) = (cookie.value().as_bytes(), submitted.as_bytes());
    a.len() == 64 && a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
