//! What every page needs (base path, CSRF token, access) and turning templates into
//! responses.

use actix_web::cookie::Cookie;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::Count;

use crate::access::{self, Access};
use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::headers::PAGE_HEADERS;

/// The per-request context every template gets as `c`.
pub(crate) struct PageCtx {
    /// Where the dashboard is mounted.
    pub(crate) base: String,
    /// The CSRF token for forms.
    pub(crate) csrf: String,
    /// Whether actions are shown.
    pub(crate) can_act: bool,
    /// The live refresh period.
    pub(crate) refresh: u32,
    /// The active tab.
    pub(crate) nav: &'static str,
    /// A one-line notice after an action.
    pub(crate) notice: Option<String>,
    cookie: Option<Cookie<'static>>,
}

impl PageCtx {
    /// Checks access and prepares the context, for a GET.
    pub(crate) fn new(
        req: &HttpRequest,
        d: &web::Data<Dashboard>,
        nav: &'static str,
    ) -> Result<PageCtx, DashboardError> {
        let access = d.config.auth.authorize(req);
        if access == Access::Denied {
            return Err(DashboardError::Denied);
        }
        let cookie_path = if d.base.is_empty() { "/".to_owned() } else { d.base.clone() };
        let (csrf, cookie) = access::csrf_token(req, &cookie_path);
        let notice = web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
            .ok()
            .and_then(|q| q.get("notice").cloned())
            .filter(|n| !n.is_empty() && n.len() < 300);
        Ok(PageCtx {
            base: d.base.clone(),
            csrf,
            can_act: access == Access::Full,
            refresh: d.config.refresh_seconds,
            nav,
            notice,
            cookie,
        })
    }

    /// The CSRF cookie to set with the response, if the request had none.
    pub(crate) fn take_cookie(&mut self) -> Option<Cookie<'static>> {
        self.cookie.take()
    }
}

/// Renders `page`, setting `cookie` if given.
pub(crate) fn respond(
    page: &impl Template,
    cookie: Option<Cookie<'static>>,
) -> Result<HttpResponse, DashboardError> {
    let body = page.render()?;
    let mut response = HttpResponse::Ok();
    response.content_type("text/html; charset=utf-8");
    for header in PAGE_HEADERS {
        response.insert_header(header);
    }
    if let Some(cookie) = cookie {
        response.cookie(cookie);
    }
    Ok(response.body(body))
}

/// A pooled connection, or a 503 page.
/// `1234567` → `1,234,567`; estimates get a `~`.
pub(crate) fn count_label(count: Count) -> String {
    match count {
        Count::Exact(n) => thousands(n),
        Count::Estimate(n) => format!("~{}", thousands(n)),
        Count::AtLeast(n) => format!("more than {}", thousands(n)),
    }
}

/// Digits grouped by thousands.
pub(crate) fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A short human duration: `850 ms`, `12.3 s`, `4 min`, `2 h`, `3 d`.
pub(crate) fn human_duration(secs: f64) -> String {
    if secs < 1.0 {
        format!("{:.0} ms", secs * 1000.0)
    } else if secs < 60.0 {
        format!("{secs:.1} s")
    } else if secs < 3600.0 {
        format!("{:.0} min", secs / 60.0)
    } else if secs < 86400.0 {
        format!("{:.1} h", secs / 3600.0)
    } else {
        format!("{:.1} d", secs / 86400.0)
    }
}

/// A time as the pages show it.
pub(crate) fn time(t: &chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_durations_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(-1000), "-1,000");
        assert_eq!(count_label(Count::Estimate(5_000_000)), "~5,000,000");
        assert_eq!(count_label(Count::AtLeast(100_000)), "more than 100,000");
        assert_eq!(human_duration(0.25), "250 ms");
        assert_eq!(human_duration(90.0), "2 min");
    }
}
