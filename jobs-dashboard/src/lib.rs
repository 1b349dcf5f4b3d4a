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
//!
//! ## Features
//!
//! - `all-drivers` (default): the `jobs-dashboard` command opens the URLs of every driver.
//!   Without it, the dashboard reads the databases of the drivers `jobs-core` has in your
//!   build.

mod access;
mod actions;
mod assets;
mod audit;
pub mod cli;
mod config;
mod error;
mod friendly;
mod headers;
mod limits_usage;
mod liveness;
mod pages;
mod params;
mod queue_settings;
mod routes;
mod view;

pub use access::{Access, AllowAll, Authorize};
pub use audit::{Audit, AuditEvent, LogActions};
pub use config::DashboardConfig;
pub use error::DashboardError;
pub use pages::overview::COUNT_CAP;
pub use routes::{configure_at, scope};
