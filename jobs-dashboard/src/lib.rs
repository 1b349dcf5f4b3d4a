//! A dashboard for [`jobs_core`]: server-rendered (actix-web + askama), mountable inside
//! your actix-web app, or run on its own (`jobs-dashboard serve`; the same command also
//! migrates, prints stats, retries/cancels/deletes by filter and enqueues: [`cli`]).
//!
//! ```
//! use actix_web::{App, test};
//! use jobs_dashboard::{Access, DashboardConfig};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let db = jobs_core::testing::TestDatabase::new().await?;
//! # let pool = db.pool(4)?;
//! let config = DashboardConfig::new(pool).authorize(|req: &actix_web::HttpRequest| {
//!     // Decide from your own session; here, a header.
//!     if req.headers().contains_key("x-admin") { Access::Full } else { Access::ReadOnly }
//! });
//! let app = test::init_service(App::new().service(jobs_dashboard::scope("/jobs", config))).await;
//! let response = test::call_service(&app, test::TestRequest::get().uri("/jobs/").to_request()).await;
//! assert!(response.status().is_success());
//! # Ok(())
//! # }
//! ```
//!
//! Pages: overview (`/`), jobs (`/jobs` with filters, `/jobs/{id}`), queues (`/queues`),
//! cron (`/cron`). Every POST carries a CSRF token; read-only users see no actions and
//! have them refused.

mod access;
mod actions;
mod assets;
pub mod cli;
mod error;
mod headers;
mod pages;
mod params;
mod view;

use std::sync::Arc;

use actix_web::web;

pub use access::{Access, AllowAll, Authorize};
pub use error::DashboardError;
use jobs_core::IntoDriver;
use jobs_core::driver::{Capability, Driver};

/// How the dashboard is set up.
#[derive(Clone)]
pub struct DashboardConfig {
    driver: Arc<dyn Driver>,
    auth: access::SharedAuthorize,
    refresh_seconds: u32,
}

impl std::fmt::Debug for DashboardConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardConfig")
            .field("driver", &self.driver.name())
            .field("refresh_seconds", &self.refresh_seconds)
            .finish_non_exhaustive()
    }
}

impl DashboardConfig {
    /// A dashboard on `driver` (or a pool a driver wraps: today's `DashboardConfig::new(pool)`),
    /// open to everyone ([`AllowAll`]) until you set [`authorize`](Self::authorize). It
    /// reads and acts only through the driver, and hides what the driver cannot do: without
    /// [`Capability::JsonContainment`] there is no search of arguments and metadata.
    pub fn new(driver: impl IntoDriver) -> DashboardConfig {
        DashboardConfig { driver: driver.into_driver(), auth: Arc::new(AllowAll), refresh_seconds: 5 }
    }

    /// Whether the driver can search arguments and metadata (the jobs page's search box).
    pub(crate) fn can_search(&self) -> bool {
        self.driver.capabilities().has(Capability::JsonContainment)
    }

    /// The hook deciding each request's [`Access`].
    pub fn authorize(mut self, auth: impl Authorize) -> DashboardConfig {
        self.auth = Arc::new(auth);
        self
    }

    /// How often live refresh reloads a page (default 5 s).
    pub fn refresh_seconds(mut self, seconds: u32) -> DashboardConfig {
        self.refresh_seconds = seconds.max(1);
        self
    }
}

/// Shared by every handler.
pub(crate) struct Dashboard {
    pub(crate) config: DashboardConfig,
    /// Where the dashboard is mounted (`/jobs`), without a trailing slash.
    pub(crate) base: String,
}

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
