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
    /// Why live refresh is off on this page (a search that scans), if it is.
    pub(crate) live_off: Option<&'static str>,
    /// A one-line notice after an action, shown once (see [`flash`]).
    pub(crate) notice: Option<String>,
    cookies: Vec<Cookie<'static>>,
}

/// The cookie that carries an action's notice to the page it redirects to. The page shows
/// it and clears it, so a reload or a shared link never shows it again (a notice in the
/// URL did).
pub(crate) const NOTICE_COOKIE: &str = "jobs_dashboard_notice";

/// The cookie path for a dashboard mounted at `base`.
pub(crate) fn cookie_path(base: &str) -> String {
    if base.is_empty() { "/".to_owned() } else { base.to_owned() }
}

/// The cookie carrying `notice` to the next page.
pub(crate) fn flash(base: &str, notice: &str) -> Cookie<'static> {
    let value: String = form_urlencoded::byte_serialize(notice.as_bytes()).collect();
    Cookie::build(NOTICE_COOKIE, value)
        .path(cookie_path(base))
        .http_only(true)
        .same_site(actix_web::cookie::SameSite::Strict)
        .max_age(actix_web::cookie::time::Duration::minutes(1))
        .finish()
}

/// The notice a request carries, if any.
fn read_flash(req: &HttpRequest) -> Option<String> {
    let cookie = req.cookie(NOTICE_COOKIE)?;
    let notice: String = form_urlencoded::parse(format!("n={}", cookie.value()).as_bytes())
        .map(|(_, v)| v.into_owned())
        .next()?;
    Some(notice).filter(|n| !n.is_empty() && n.len() < 300)
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
        let path = cookie_path(&d.base);
        let (csrf, cookie) = access::csrf_token(req, &path);
        let mut cookies: Vec<Cookie<'static>> = cookie.into_iter().collect();
        let notice = read_flash(req);
        if req.cookie(NOTICE_COOKIE).is_some() {
            let mut gone = Cookie::build(NOTICE_COOKIE, "").path(path).finish();
            gone.make_removal();
            cookies.push(gone);
        }
        Ok(PageCtx {
            base: d.base.clone(),
            csrf,
            can_act: access == Access::Full,
            refresh: d.config.refresh_seconds,
            nav,
            live_off: None,
            notice,
            cookies,
        })
    }

    /// The cookies to set with the response: the CSRF token if the request had none, and
    /// the removal of a notice once shown.
    pub(crate) fn take_cookies(&mut self) -> Vec<Cookie<'static>> {
        std::mem::take(&mut self.cookies)
    }
}

/// Renders `page`, setting `cookies`.
pub(crate) fn respond(
    page: &impl Template,
    cookies: Vec<Cookie<'static>>,
) -> Result<HttpResponse, DashboardError> {
    let body = page.render()?;
    let mut response = HttpResponse::Ok();
    response.content_type("text/html; charset=utf-8");
    for header in PAGE_HEADERS {
        response.insert_header(header);
    }
    for cookie in cookies {
        response.cookie(cookie);
    }
    Ok(response.body(body))
}

/// What a count's tooltip says: how it was counted. Every count on every page is marked
/// the same way (`~` and this title for an estimate).
pub(crate) fn count_title(count: Count) -> &'static str {
    match count {
        Count::Exact(_) => "exact count",
        Count::Estimate(_) => {
            "estimated from the database's statistics: exact counts stop at 10,000, or sooner when slow"
        }
        Count::AtLeast(_) => "counted up to a limit: more jobs match",
    }
}

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

/// A time as a `<time>` element: the exact time as its text and tooltip, which the
/// page's script turns into a relative one ("3 min ago", "in 2 h"), keeping the tooltip.
pub(crate) fn time_html(t: &chrono::DateTime<chrono::Utc>) -> String {
    let exact = time(t);
    format!(
        r#"<time datetime="{}" title="{exact}">{exact}</time>"#,
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// A time as a `<time>` element the page's script leaves exact (the job's timeline,
/// where gaps matter more than "ago").
pub(crate) fn time_exact_html(t: &chrono::DateTime<chrono::Utc>) -> String {
    let exact = time(t);
    format!(
        r#"<time class="exact" datetime="{}" title="{exact}">{exact}</time>"#,
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// The templates' filters: `{{ n|num }}` groups digits, `{{ t|when|safe }}` is a
/// [`time_html`] element (built only from the time, so safe to emit unescaped).
pub(crate) mod filters {
    use std::fmt::Display;

    /// A count as its label (see [`super::count_label`]).
    pub(crate) fn count(n: &jobs_core::Count, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::count_label(*n))
    }

    /// A count's tooltip (see [`super::count_title`]).
    pub(crate) fn count_title(n: &jobs_core::Count, _: &dyn askama::Values) -> askama::Result<&'static str> {
        Ok(super::count_title(*n))
    }

    /// Digits grouped by thousands, for any integer.
    pub(crate) fn num<T: Display>(n: T, _: &dyn askama::Values) -> askama::Result<String> {
        let text = n.to_string();
        Ok(text.parse::<i64>().map(super::thousands).unwrap_or(text))
    }

    /// A time as a `<time>` element.
    pub(crate) fn when(t: &chrono::DateTime<chrono::Utc>, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::time_html(t))
    }
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
