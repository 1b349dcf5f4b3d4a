//! What the worker, the dashboard and the services accept as their database: a driver,
//! or a pool that a driver wraps (the impls for the drivers of the build are in
//! `drivers.rs`).

use std::sync::Arc;

use jobs_driver::Driver;

/// Converts into the shared driver the engine runs on: `Worker::builder(pool)`,
/// `Worker::builder(driver)`, `DashboardConfig::new(pool)`.
pub trait IntoDriver {
    /// The driver.
    fn into_driver(self) -> Arc<dyn Driver>;
}

impl IntoDriver for Arc<dyn Driver> {
    fn into_driver(self) -> Arc<dyn Driver> {
        self
    }
}

impl IntoDriver for &Arc<dyn Driver> {
    fn into_driver(self) -> Arc<dyn Driver> {
        self.clone()
    }
}
