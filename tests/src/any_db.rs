//! The tests' own statements on a job database of any backend: counts in the SQL they
//! share, and the `runs` table the fault jobs write (placeholders differ: `$1` on
//! Postgres, `?` on SQLite and MySQL).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Text};
use diesel_async::RunQueryDsl;
use jobs_core::driver::Driver;
use jobs_core::driver::rows::Count;

/// A pool on the database a driver runs on.
#[derive(Clone)]
pub enum AnyDb {
    /// Postgres.
    Postgres(jobs_core::postgres::Pool),
    /// SQLite.
    Sqlite(jobs_core::sqlite::Pool),
    /// MariaDB or MySQL.
    Mysql(jobs_core::mysql::Pool),
}

/// One attempt the `fault.step` job recorded.
#[derive(Debug, Clone, QueryableByName)]
pub struct Run {
    /// The job.
    #[diesel(sql_type = BigInt)]
    pub job_id: i64,
    /// Its attempt.
    #[diesel(sql_type = Integer)]
    pub attempt: i32,
    /// The node that ran it.
    #[diesel(sql_type = Text)]
    pub node: String,
    /// When it started, in milliseconds since the epoch (the worker's clock).
    #[diesel(sql_type = BigInt)]
    pub at_ms: i64,
    /// The run's own number, random: a record written again after its reply was lost
    /// (the server restarted under it) is the same run, not a second one.
    #[diesel(sql_type = BigInt)]
    pub run_id: i64,
}

/// The `runs` table, in SQL every backend takes. `run_id` is unique: recording a run
/// again (after a lost reply) adds nothing.
pub const RUNS_TABLE: &str = "CREATE TABLE runs (job_id bigint NOT NULL, attempt int NOT NULL, node text NOT NULL, \
     at_ms bigint NOT NULL, run_id bigint NOT NULL UNIQUE)";

/// Runs `$body` with `$conn`, a connection of `$db`, whichever backend it is.
macro_rules! with_connection {
    ($db:expr, |$conn:ident| $body:expr) => {
        match $db {
            AnyDb::Postgres(pool) => {
                use diesel_async::{AnsiTransactionManager, TransactionManager};
                let mut $conn = pool.get().await.map_err(|e| e.to_string())?;
                // A transaction of its own: the pool may go through PgBouncer in
                // transaction mode, where a statement outside one is not safe.
                AnsiTransactionManager::begin_transaction(&mut *$conn).await.map_err(|e| e.to_string())?;
                let result = $body;
                match &result {
                    Ok(_) => AnsiTransactionManager::commit_transaction(&mut *$conn).await,
                    Err(_) => AnsiTransactionManager::rollback_transaction(&mut *$conn).await,
                }
                .map_err(|e| e.to_string())?;
                result
            }
            AnyDb::Sqlite(pool) => {
                let mut $conn = pool.get().await.map_err(|e| e.to_string())?;
                $body
            }
            AnyDb::Mysql(pool) => {
                let mut $conn = pool.get().await.map_err(|e| e.to_string())?;
                $body
            }
        }
    };
}

impl AnyDb {
    /// The database `driver` runs on.
    pub fn of(driver: &dyn Driver) -> AnyDb {
        if let Some(pool) = driver.pool().downcast_ref::<jobs_core::postgres::Pool>() {
            return AnyDb::Postgres(pool.clone());
        }
        if let Some(pool) = driver.pool().downcast_ref::<jobs_core::sqlite::Pool>() {
            return AnyDb::Sqlite(pool.clone());
        }
        if let Some(pool) = driver.pool().downcast_ref::<jobs_core::mysql::Pool>() {
            return AnyDb::Mysql(pool.clone());
        }
        panic!("no test support for the {} driver", driver.name())
    }

    /// Runs a statement.
    pub async fn execute(&self, sql: &str) -> Result<usize, String> {
        with_connection!(self, |conn| diesel::sql_query(sql)
            .execute(&mut conn)
            .await
            .map_err(|e| e.to_string()))
    }

    /// Runs a query returning one `bigint` column named `n`; `None` while the database
    /// cannot answer.
    pub async fn try_count(&self, sql: &str) -> Option<i64> {
        let counted: Result<i64, String> = async {
            with_connection!(self, |conn| {
                diesel::sql_query(sql)
                    .get_result::<Count>(&mut conn)
                    .await
                    .map(|c| c.n)
                    .map_err(|e| e.to_string())
            })
        }
        .await;
        counted.ok()
    }

    /// Records run `run_id` of `job_id` at `attempt` on `node` in the `runs` table, at
    /// most once: a second record of one `run_id` (the first's reply lost) adds nothing.
    /// Returns whether this call wrote it.
    pub async fn record_run(
        &self,
        job_id: i64,
        attempt: i32,
        node: &str,
        run_id: i64,
    ) -> Result<bool, String> {
        let sql = match self {
            AnyDb::Postgres(_) => {
                "INSERT INTO runs (job_id, attempt, node, at_ms, run_id) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (run_id) DO NOTHING"
            }
            AnyDb::Sqlite(_) => {
                "INSERT INTO runs (job_id, attempt, node, at_ms, run_id) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (run_id) DO NOTHING"
            }
            AnyDb::Mysql(_) => {
                "INSERT IGNORE INTO runs (job_id, attempt, node, at_ms, run_id) VALUES (?, ?, ?, ?, ?)"
            }
        };
        with_connection!(self, |conn| {
            diesel::sql_query(sql)
                .bind::<BigInt, _>(job_id)
                .bind::<Integer, _>(attempt)
                .bind::<Text, _>(node)
                .bind::<BigInt, _>(chrono::Utc::now().timestamp_millis())
                .bind::<BigInt, _>(run_id)
                .execute(&mut conn)
                .await
                .map(|n| n == 1)
                .map_err(|e| e.to_string())
        })
    }

    /// Every recorded run, or `None` when there is no `runs` table.
    pub async fn runs(&self) -> Option<Vec<Run>> {
        let runs: Result<Vec<Run>, String> = async {
            with_connection!(self, |conn| {
                diesel::sql_query("SELECT job_id, attempt, node, at_ms, run_id FROM runs")
                    .load(&mut conn)
                    .await
                    .map_err(|e| e.to_string())
            })
        }
        .await;
        runs.ok()
    }
}
