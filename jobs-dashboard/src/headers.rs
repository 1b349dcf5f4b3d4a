//! The security headers every response carries, pages and error pages alike.

/// Headers on every page: no script or style but the dashboard's own files (so markup that
/// slipped through escaping still cannot run or restyle the page), no framing, no MIME
/// sniffing, no caching.
pub(crate) const PAGE_HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
];
