//! Mounting the dashboard: its routes, in a scope of their own or in the app's.

use actix_web::web;

use crate::config::{Dashboard, DashboardConfig};
use crate::{actions, assets, pages};

/// The dashboard as an actix-web scope mounted at `path`:
/// `App::new().service(jobs_dashboard::scope("/jobs", config))`.
pub fn scope(path: &str, config: DashboardConfig) -> actix_web::Scope {
    let base = path.trim_end_matches('/').to_owned();
    web::scope(&base).configure(configure_at(&base, config))
}

/// Registers the dashboard's routes on a service config whose scope is mounted at `base`
/// (`web::scope("/admin/jobs").configure(jobs_dashboard::configure_at("/admin/jobs", config))`).
pub fn configure_at(base: &str, config: DashboardConfig) -> impl FnOnce(&mut web::ServiceConfig) + use<> {
    let data = web::Data::new(Dashboard { config, base: base.trim_end_matches('/').to_owned() });
    move |cfg: &mut web::ServiceConfig| {
        cfg.app_data(data)
            .route("", web::get().to(pages::overview::redirect_to_slash))
            .route("/", web::get().to(pages::overview::page))
            .route("/jobs", web::get().to(pages::jobs::page))
            .route("/jobs/bulk", web::post().to(actions::bulk))
            .route("/jobs/{id}", web::get().to(pages::job::page))
            .route("/jobs/{id}/{action}", web::post().to(actions::one))
            .route("/queues", web::get().to(pages::queues::page))
            .route("/queues/{name}/{action}", web::post().to(actions::queue))
            .route("/cron", web::get().to(pages::cron::page))
            .route("/cron/{name}/{action}", web::post().to(actions::schedule))
            .route("/assets/dashboard.css", web::get().to(assets::css))
            .route("/assets/dashboard.js", web::get().to(assets::js))
            .default_service(web::to(pages::not_found));
    }
}
