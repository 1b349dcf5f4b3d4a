//! What the fault-injection tests check after the faults: every job's fate, read through
//! the driver and from the `runs` table the [`step`](crate::fault_jobs::step) job writes,
//! on any backend.

use std::time::Duration;

use std::collections::HashMap;

use diesel_async::{AsyncPgConnection, RunQueryDsl};
use jobs_core::driver::rows::Count;
use jobs_core::driver::{Count as Counted, Driver, JobCountParams, JobFilter, JobListParams};
use jobs_core::postgres::Pool;
use jobs_core::{IntoDriver, JobRow, JobState};

use crate::any_db::{AnyDb, RUNS_TABLE, Run};
use crate::wait_for;

/// Counts the completed jobs.
pub const COMPLETED: &str = "SELECT count(*) AS n FROM jobs_all WHERE state = 'completed'";

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

/// Every job, read through the driver a page at a time, oldest first.
pub async fn all_jobs(driver: &dyn Driver) -> Vec<JobRow> {
    let filter = JobFilter::default();
    let (mut before, mut all) = (None, Vec::new());
    loop {
        let page = driver
            .job_list(JobListParams { filter: &filter, before, limit: 10_000 })
            .await
            .expect("list jobs");
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        all.extend(page);
    }
    all.reverse();
    all
}

/// How many rows break an invariant of `JobRow::invariant_violations` (each broken row is
/// printed).
pub async fn invalid_rows(db: impl IntoDriver) -> i64 {
    let driver = db.into_driver();
    let mut invalid = 0;
    for row in all_jobs(&*driver).await {
        let broken = row.invariant_violations();
        if !broken.is_empty() {
            println!("job {} breaks {broken:?}", row.id);
            invalid += 1;
        }
    }
    invalid
}

/// How many jobs are in `states` (exactly, up to ten million), `None` while the database
/// cannot answer.
pub async fn try_count_states(driver: &dyn Driver, states: &[JobState]) -> Option<i64> {
    let filter = JobFilter { states: states.to_vec(), ..JobFilter::default() };
    match driver.job_count(JobCountParams { filter: &filter, cap: 10_000_000 }).await.ok()? {
        Counted::Exact(n) => Some(n),
        _ => None,
    }
}

/// Every job's fate after a faulty run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLedger {
    /// Jobs enqueued.
    pub enqueued: i64,
    /// Jobs kept (in `jobs_all`: the jobs table and, on Postgres, the archive).
    pub rows: i64,
    /// Jobs completed.
    pub completed: i64,
    /// Jobs still `running`.
    pub running: i64,
    /// Jobs that ran more than once at the same attempt (a double run).
    pub duplicates: i64,
    /// Each double run: the job, its attempt, its runs (node, start in ms, run number), and
    /// the job's nodes and error entries, to find the path that ran it twice.
    pub doubled: Vec<String>,
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
    pub async fn wait_all_completed(db: impl IntoDriver, enqueued: usize, deadline: Duration) -> JobLedger {
        let driver = db.into_driver();
        let enqueued = i64::try_from(enqueued).expect("count fits");
        wait_for(&format!("all {enqueued} jobs to complete"), deadline, || async {
            (try_count_states(&*driver, &[JobState::Completed]).await? >= enqueued).then_some(())
        })
        .await;
        JobLedger::read(driver, enqueued).await
    }

    /// Reads the ledger now, through the driver (the checks on runs apply when the `runs`
    /// table exists).
    pub async fn read(db: impl IntoDriver, enqueued: i64) -> JobLedger {
        let driver = db.into_driver();
        let jobs = all_jobs(&*driver).await;
        let count = |f: &dyn Fn(&JobRow) -> bool| jobs.iter().filter(|j| f(j)).count() as i64;
        let error_entries = |job: &JobRow| job.errors.as_array().cloned().unwrap_or_default();
        let mut ledger = JobLedger {
            enqueued,
            rows: jobs.len() as i64,
            completed: count(&|j| j.state == JobState::Completed),
            running: count(&|j| j.state == JobState::Running),
            duplicates: 0,
            doubled: Vec::new(),
            missing_final_run: 0,
            runs_after_final: 0,
            unexplained_attempts: jobs
                .iter()
                .map(|j| {
                    let explained: Vec<i64> = error_entries(j)
                        .iter()
                        .filter_map(|e| e.get("attempt").and_then(|a| a.as_i64()))
                        .collect();
                    (1..i64::from(j.attempt)).filter(|a| !explained.contains(a)).count() as i64
                })
                .sum(),
            retried_jobs: count(&|j| j.attempt > 1),
            rescued_jobs: count(&|j| {
                error_entries(j).iter().any(|e| {
                    e.get("error_type").and_then(|t| t.as_str()).is_some_and(|t| t.starts_with("rescued_"))
                })
            }),
            invalid_rows: jobs.iter().filter(|j| !j.invariant_violations().is_empty()).count() as i64,
        };
        if let Some(runs) = AnyDb::of(&*driver).runs().await {
            let final_attempt: HashMap<i64, (JobState, i32)> =
                jobs.iter().map(|j| (j.id, (j.state, j.attempt))).collect();
            let mut seen: HashMap<(i64, i32), Vec<&Run>> = HashMap::new();
            for run in &runs {
                seen.entry((run.job_id, run.attempt)).or_default().push(run);
                if final_attempt.get(&run.job_id).is_some_and(|(_, attempt)| run.attempt > *attempt) {
                    ledger.runs_after_final += 1;
                }
            }
            for ((id, attempt), twice) in seen.iter().filter(|(_, runs)| runs.len() > 1) {
                let job = jobs.iter().find(|j| j.id == *id);
                ledger.doubled.push(format!(
                    "job {id} attempt {attempt}: runs {:?}; attempted by {:?}; errors {}",
                    twice.iter().map(|r| (&r.node, r.at_ms, r.run_id)).collect::<Vec<_>>(),
                    job.map(|j| j.attempted_by.clone()).unwrap_or_default(),
                    job.map(|j| j.errors.to_string()).unwrap_or_default(),
                ));
            }
            ledger.doubled.sort();
            ledger.duplicates = ledger.doubled.len() as i64;
            ledger.missing_final_run = jobs
                .iter()
                .filter(|j| j.state == JobState::Completed && !seen.contains_key(&(j.id, j.attempt)))
                .count() as i64;
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
        assert_eq!(self.rows, self.enqueued, "jobs kept vs enqueued: {self:?}");
        assert_eq!(self.completed, self.enqueued, "completions vs enqueued: {self:?}");
        assert_eq!(self.running, 0, "jobs left running: {self:?}");
        assert_eq!(self.duplicates, 0, "jobs run twice at one attempt: {self:?}");
        assert_eq!(self.missing_final_run, 0, "completed without a run: {self:?}");
        assert_eq!(self.runs_after_final, 0, "runs after the final attempt: {self:?}");
        assert_eq!(self.unexplained_attempts, 0, "attempts ended without an error entry: {self:?}");
        assert_eq!(self.invalid_rows, 0, "rows breaking the table's invariants: {self:?}");
    }
}

/// How many running jobs `node` holds now (`None`: the database did not answer).
pub async fn held_by(driver: &dyn Driver, node: &str) -> Option<i64> {
    let filter = JobFilter { states: vec![JobState::Running], ..JobFilter::default() };
    let params = JobListParams { filter: &filter, before: None, limit: 100_000 };
    let running = driver.job_list(params).await.ok()?;
    Some(running.iter().filter(|j| j.attempted_by.last().is_some_and(|n| n == node)).count() as i64)
}
