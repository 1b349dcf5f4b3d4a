//! What the fault-injection tests check after the faults: every job's fate, read from the
//! `jobs` table and the `runs` table the [`step`](crate::fault_jobs::step) job writes.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_core::driver::{JobFilter, JobListParams};
use jobs_core::{IntoDriver, Pool};

use crate::fault_jobs::RUNS_TABLE;
use crate::wait_for;

/// Counts the completed jobs.
pub const COMPLETED: &str = "SELECT count(*) AS n FROM jobs WHERE state = 'completed'";

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// Runs a query returning one `bigint` column named `n`.
pub async fn count(conn: &mut AsyncPgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql).get_result::<Count>(conn).await.expect("count query").n
}

/// [`count`] on a pooled connection, `None` while the database is unreachable.
pub async fn try_count(pool: &Pool, sql: &str) -> Option<i64> {
    let mut conn = pool.get().await.ok()?;
    diesel::sql_query(sql).get_result::<Count>(&mut conn).await.ok().map(|c| c.n)
}

/// Creates the `runs` table the `fault.step` job records its attempts in.
pub async fn create_runs_table(conn: &mut AsyncPgConnection) {
    diesel::sql_query(RUNS_TABLE).execute(conn).await.expect("runs table");
}

/// How many rows break an invariant of `JobRow::invariant_violations` (read through the
/// driver, a page at a time; each broken row is printed).
pub async fn invalid_rows(pool: &Pool) -> i64 {
    let driver = pool.into_driver();
    let filter = JobFilter::default();
    let (mut before, mut invalid) = (None, 0);
    loop {
        let page = driver
            .job_list(JobListParams { filter: &filter, before, limit: 10_000 })
            .await
            .expect("list jobs");
        let Some(last) = page.last() else { return invalid };
        before = Some(last.id);
        for row in &page {
            let broken = row.invariant_violations();
            if !broken.is_empty() {
                println!("job {} breaks {broken:?}", row.id);
                invalid += 1;
            }
        }
    }
}

/// Every job's fate after a faulty run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLedger {
    /// Jobs enqueued.
    pub enqueued: i64,
    /// Rows in `jobs`.
    pub rows: i64,
    /// Jobs completed.
    pub completed: i64,
    /// Jobs still `running`.
    pub running: i64,
    /// Jobs that ran more than once at the same attempt (a double run).
    pub duplicates: i64,
    /// Completed jobs with no run recorded at their final attempt.
    pub missing_final_run: i64,
    /// Runs recorded at an attempt above the job's final one.
    pub runs_after_final: i64,
    /// Earlier attempts with no error entry explaining why they did not finish.
    pub unexplained_attempts: i64,
    /// Jobs that needed more than one attempt.
    pub retried_jobs: i64,
    /// Jobs rescued at least once (their node died, or their claim's reply was lost).
    pub rescued_jobs: i64,
    /// Rows breaking an invariant the table does not check itself
    /// (`JobRow::invariant_violations`).
    pub invalid_rows: i64,
}

impl JobLedger {
    /// Waits until `enqueued` jobs are completed (failing the test after `deadline`),
    /// then reads the ledger.
    pub async fn wait_all_completed(pool: &Pool, enqueued: usize, deadline: Duration) -> JobLedger {
        let enqueued = i64::try_from(enqueued).expect("count fits");
        wait_for(&format!("all {enqueued} jobs to complete"), deadline, || async {
            (try_count(pool, COMPLETED).await? >= enqueued).then_some(())
        })
        .await;
        JobLedger::read(pool, enqueued).await
    }

    /// Reads the ledger now (the checks on runs apply when the `runs` table exists).
    pub async fn read(pool: &Pool, enqueued: i64) -> JobLedger {
        let mut conn = pool.get().await.expect("connection");
        let conn: &mut AsyncPgConnection = &mut conn;
        let has_runs = count(conn, "SELECT count(*) AS n FROM pg_tables WHERE tablename = 'runs'").await > 0;
        let mut ledger = JobLedger {
            enqueued,
            rows: count(conn, "SELECT count(*) AS n FROM jobs").await,
            completed: count(conn, COMPLETED).await,
            running: count(conn, "SELECT count(*) AS n FROM jobs WHERE state = 'running'").await,
            duplicates: 0,
            missing_final_run: 0,
            runs_after_final: 0,
            unexplained_attempts: count(
                conn,
                "SELECT count(*) AS n FROM jobs j, generate_series(1, j.attempt - 1) AS a \
                 WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(j.errors) e \
                                   WHERE (e->>'attempt')::int = a)",
            )
            .await,
            retried_jobs: count(conn, "SELECT count(*) AS n FROM jobs WHERE attempt > 1").await,
            rescued_jobs: count(
                conn,
                "SELECT count(*) AS n FROM jobs WHERE EXISTS \
                 (SELECT 1 FROM jsonb_array_elements(errors) e WHERE e->>'error_type' LIKE 'rescued_%')",
            )
            .await,
            invalid_rows: invalid_rows(pool).await,
        };
        if has_runs {
            ledger.duplicates = count(
                conn,
                "SELECT count(*) AS n FROM (SELECT job_id, attempt FROM runs GROUP BY 1, 2 HAVING count(*) > 1) d",
            )
            .await;
            ledger.missing_final_run = count(
                conn,
                "SELECT count(*) AS n FROM jobs j WHERE j.state = 'completed' AND NOT EXISTS \
                 (SELECT 1 FROM runs r WHERE r.job_id = j.id AND r.attempt = j.attempt)",
            )
            .await;
            ledger.runs_after_final = count(
                conn,
                "SELECT count(*) AS n FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.attempt > j.attempt",
            )
            .await;
        }
        ledger
    }

    /// Jobs enqueued and not completed.
    pub fn lost(&self) -> i64 {
        self.enqueued - self.completed
    }

    /// Fails the test unless every job completed once, at one attempt, with every earlier
    /// attempt explained by an error entry, and nothing is left running.
    pub fn assert_exactly_once(&self) {
        assert_eq!(self.rows, self.enqueued, "rows in jobs vs enqueued: {self:?}");
        assert_eq!(self.completed, self.enqueued, "completions vs enqueued: {self:?}");
        assert_eq!(self.running, 0, "jobs left running: {self:?}");
        assert_eq!(self.duplicates, 0, "jobs run twice at one attempt: {self:?}");
        assert_eq!(self.missing_final_run, 0, "completed without a run: {self:?}");
        assert_eq!(self.runs_after_final, 0, "runs after the final attempt: {self:?}");
        assert_eq!(self.unexplained_attempts, 0, "attempts ended without an error entry: {self:?}");
        assert_eq!(self.invalid_rows, 0, "rows breaking the table's invariants: {self:?}");
    }
}
