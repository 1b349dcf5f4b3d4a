//! The database a run measures (Postgres, SQLite or MySQL, by the URL's scheme) and the
//! benchmark's own statements on it: setup and checks, never measured.

use std::sync::Arc;

use diesel::QueryableByName;
use diesel::sql_types::Double;
use jobs_core::driver::{Count, Driver, JobCountParams, JobFilter};

use crate::measure::{self, BenchResult};

/// A pool on the measured database, for the benchmark's own statements.
enum Pool {
    Postgres(jobs_core::postgres::Pool),
    Sqlite(jobs_core::sqlite::Pool),
    Mysql(jobs_core::mysql::Pool),
}

/// The measured database: its driver, and a pool for setup statements.
pub(crate) struct Admin {
    /// The driver (enqueues, pauses, counts).
    pub(crate) driver: Arc<dyn Driver>,
    pool: Pool,
}

#[derive(QueryableByName)]
struct Millis {
    #[diesel(sql_type = Double)]
    ms: f64,
}

#[derive(QueryableByName)]
struct Number {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// Runs `$body` with `$conn`, a connection of `$pool`, whichever backend it is.
macro_rules! with_connection {
    ($pool:expr, |$conn:ident| $body:expr) => {
        match $pool {
            Pool::Postgres(pool) => {
                let mut $conn = pool.get().await?;
                $body
            }
            Pool::Sqlite(pool) => {
                let mut $conn = pool.get().await?;
                $body
            }
            Pool::Mysql(pool) => {
                let mut $conn = pool.get().await?;
                $body
            }
        }
    };
}

impl Admin {
    /// Opens the database `url` names, with a pool of `connections`.
    pub(crate) fn open(url: &str, connections: usize) -> BenchResult<Admin> {
        let driver = jobs_core::driver_for_url(url, connections)?;
        let pool = if let Some(pool) = driver.pool().downcast_ref::<jobs_core::postgres::Pool>() {
            Pool::Postgres(pool.clone())
        } else if let Some(pool) = driver.pool().downcast_ref::<jobs_core::sqlite::Pool>() {
            Pool::Sqlite(pool.clone())
        } else if let Some(pool) = driver.pool().downcast_ref::<jobs_core::mysql::Pool>() {
            Pool::Mysql(pool.clone())
        } else {
            return Err(format!("the benchmark does not know the {} driver", driver.name()).into());
        };
        Ok(Admin { driver, pool })
    }

    /// Whether the database is Postgres.
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// Whether the database is SQLite.
    pub(crate) fn is_sqlite(&self) -> bool {
        matches!(self.pool, Pool::Sqlite(_))
    }

    /// Runs a query of the benchmark's own that returns one integer column named `n`.
    pub(crate) async fn number(&self, statement: &str) -> BenchResult<i64> {
        let row: Number = with_connection!(&self.pool, |conn| diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(statement),
            &mut conn
        )
        .await?);
        Ok(row.n)
    }

    /// Runs a statement of the benchmark's own.
    pub(crate) async fn sql(&self, statement: &str) -> BenchResult {
        with_connection!(&self.pool, |conn| {
            diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), &mut conn).await?;
        });
        Ok(())
    }

    /// Empties the jobs table (and, on Postgres, vacuums it; on SQLite, checkpoints the
    /// WAL), so that no scenario pays for the one before.
    pub(crate) async fn reset(&self) -> BenchResult {
        match &self.pool {
            Pool::Postgres(pool) => measure::reset(pool).await,
            Pool::Sqlite(_) => {
                self.sql("DELETE FROM jobs").await.and(self.sql("PRAGMA wal_checkpoint(TRUNCATE)").await)
            }
            Pool::Mysql(_) => self.sql("TRUNCATE TABLE jobs").await,
        }
    }

    /// Refreshes the planner's statistics after a load.
    pub(crate) async fn analyze(&self) -> BenchResult {
        match &self.pool {
            Pool::Postgres(_) => self.sql("VACUUM ANALYZE jobs, jobs_archive").await,
            Pool::Sqlite(_) => self.sql("ANALYZE").await,
            Pool::Mysql(_) => self.sql("ANALYZE TABLE jobs").await,
        }
    }

    /// How many jobs are in `states` (all when empty).
    pub(crate) async fn count(&self, states: &[jobs_core::JobState]) -> BenchResult<i64> {
        let filter = JobFilter { states: states.to_vec(), ..JobFilter::default() };
        match self.driver.job_count(JobCountParams { filter: &filter, cap: i64::MAX - 1 }).await? {
            Count::Exact(n) => Ok(n),
            other => Err(format!("expected an exact count, got {other:?}").into()),
        }
    }

    /// Every job's claim → completion time in milliseconds, sorted.
    pub(crate) async fn claim_to_completion_ms(&self) -> BenchResult<Vec<f64>> {
        let sql = match &self.pool {
            Pool::Postgres(_) => {
                "SELECT (EXTRACT(EPOCH FROM finalized_at - attempted_at) * 1000)::float8 AS ms FROM jobs_all \
                 WHERE finalized_at IS NOT NULL"
            }
            Pool::Sqlite(_) => {
                "SELECT CAST(finalized_at - attempted_at AS REAL) AS ms FROM jobs_all WHERE finalized_at IS NOT NULL"
            }
            Pool::Mysql(_) => {
                "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, attempted_at, finalized_at) / 1000 AS DOUBLE) AS ms FROM jobs_all \
                 WHERE finalized_at IS NOT NULL"
            }
        };
        let rows: Vec<Millis> = with_connection!(&self.pool, |conn| diesel_async::RunQueryDsl::load(
            diesel::sql_query(sql),
            &mut conn
        )
        .await?);
        let mut ms: Vec<f64> = rows.into_iter().map(|r| r.ms).collect();
        ms.sort_by(f64::total_cmp);
        Ok(ms)
    }
}
