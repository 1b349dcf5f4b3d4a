//! The dashboard's own CSS and JavaScript, served by the crate (no CDN).

use actix_web::HttpResponse;

const CSS: &str = include_str!("../assets/dashboard.css");
const JS: &str = include_str!("../assets/dashboard.js");

pub(crate) async fn css() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header(("cache-control", "max-age=3600"))
        .body(CSS)
}

pub(crate) async fn js() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header(("cache-control", "max-age=3600"))
        .body(JS)
}
