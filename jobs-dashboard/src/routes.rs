//! Mounting the dashboard: its routes, in a scope of their own or in the app's.

use actix_web::middleware::from_fn;
use actix_web::web;

use crate::config::{Dashboard, DashboardConfig};
use crate::{actions, assets, friendly, pages};

/// The dashboard as an actix-web scope mounted at `path`:
/// `App::new().service(jobs_dashboard::scope("/jobs", config))`.
pub fn scope(path: &str, config: DashboardConfig) -> actix_web::Scope {
    let base = path.trim_end_matches('/').to_owned();
    web::scope(&base).configure(configure_at(&base, config))
}

/// Registers the dashboard's routes on a service config whose scope is mounted at `base`
/// (`web::scope("/admin/jobs").configure(jobs_dashboard::configure_at("/admin/jobs", config))`).
pub fn configure_at(base: &str, config: DashboardConfig) -> impl FnOnce(&mut web::ServiceConfig) + use<> {
    // Once per process: actix builds the app once per server thread.
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Some(warning) = config.open_warning(base.trim_end_matches('/'))
        && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        tracing::warn!("{warning}");
    }
    let data = web::Data::new(Dashboard { config, base: base.trim_end_matches('/').to_owned() });
    move |cfg: &mut web::ServiceConfig| {
        cfg.app_data(data)
            .route("", web::get().to(pages::overview::redirect_to_slash))
            .service(at("/").route(web::get().to(pages::overview::page)))
            .service(at("/jobs").route(web::get().to(pages::jobs::page)))
            .service(at("/jobs/bulk").route(web::post().to(actions::bulk)))
            .service(
                at("/jobs/new")
                    .route(web::get().to(pages::enqueue::page))
                    .route(web::post().to(pages::enqueue::submit)),
            )
            .service(at("/jobs/{id}").route(web::get().to(pages::job::page)))
            .service(at("/jobs/{id}/{action}").route(web::post().to(actions::one)))
            .service(at("/queues").route(web::get().to(pages::queues::page)))
            .service(at("/kinds").route(web::get().to(pages::kinds::page)))
            .service(at("/queues/{name}/{action}").route(web::post().to(actions::queue)))
            .service(at("/cron").route(web::get().to(pages::cron::page)))
            .service(at("/cron/{name}/{action}").route(web::post().to(actions::schedule)))
            .route("/assets/dashboard.css", web::get().to(assets::css))
            .route("/assets/dashboard.js", web::get().to(assets::js))
            .default_service(web::to(pages::not_found));
    }
}

/// A resource whose error responses are friendly pages ([`friendly::errors`]).
fn at(
    path: &str,
) -> actix_web::Resource<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    web::resource(path).wrap(from_fn(friendly::errors))
}
