//! `ctx.pool()` and `ctx.conn()` in a job on Postgres: the worker's pool, typed.

use std::future::Future;

use jobs_driver::{DriverError, HasDriver, Result};

use crate::pool::{Pool, PooledConnection};

/// The worker's Postgres pool in a job's context, for the job's own queries: with
/// `use jobs_core::postgres::PgContext;`, a handler's `ctx.pool()?` and
/// `ctx.conn().await?`.
///
/// ```no_run
/// use diesel_async::RunQueryDsl;
/// use jobs_postgres::PgContext;
///
/// // `ctx` is the handler's `jobs_core::JobContext`.
/// async fn touch_users(ctx: &(impl PgContext + Sync)) -> Result<usize, Box<dyn std::error::Error>> {
///     let mut conn = ctx.conn().await?;
///     Ok(diesel::sql_query("UPDATE users SET seen_at = now()").execute(&mut conn).await?)
/// }
/// ```
pub trait PgContext: HasDriver {
    /// The worker's pool. Fails when the context has no driver (one built for a unit
    /// test) or the driver is not Postgres.
    fn pool(&self) -> Result<&Pool> {
        let driver =
            self.driver_ref().ok_or_else(|| DriverError::Pool("this job context has no pool".into()))?;
        driver.pool().downcast_ref::<Pool>().ok_or_else(|| {
            DriverError::Pool(format!("the {} driver's pool is not a Postgres pool", driver.name()))
        })
    }

    /// A connection from the worker's pool.
    fn conn(&self) -> impl Future<Output = Result<PooledConnection>> + Send
    where
        Self: Sync,
    {
        async move { crate::pool::get(self.pool()?).await }
    }
}

impl<T: HasDriver + ?Sized> PgContext for T {}
