//! The worker's queries: claim a batch, write a batch of outcomes back, fenced on the
//! attempt.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Int2, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::db::cached::CachedQuery;
use crate::error::Result;
use crate::state::JobState;

/// The SQL types of a claim's columns, in the order of its `RETURNING`.
type ClaimedRow = (
    BigInt,
    Text,
    Text,
    Text,
    Text,
    Array<Text>,
    Int2,
    Int4,
    Int4,
    Nullable<BigInt>,
    Timestamptz,
    Timestamptz,
    Timestamptz,
);

/// A job a worker has just claimed: everything needed to run it. Its fields follow the
/// claim's `RETURNING` list (decoded by position).
#[derive(Debug, Clone, QueryableByName, diesel::Queryable)]
pub struct ClaimedJob {
    /// Job id.
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    /// Kind name.
    #[diesel(sql_type = Text)]
    pub kind: String,
    /// Queue.
    #[diesel(sql_type = Text)]
    pub queue: String,
    /// Arguments, as JSON text (decoded by the job's descriptor).
    #[diesel(sql_type = Text)]
    pub args: String,
    /// Metadata, as JSON text.
    #[diesel(sql_type = Text)]
    pub meta: String,
    /// Tags.
    #[diesel(sql_type = Array<Text>)]
    pub tags: Vec<String>,
    /// Priority.
    #[diesel(sql_type = Int2)]
    pub priority: i16,
    /// This claim's attempt number (the fence for the outcome).
    #[diesel(sql_type = Int4)]
    pub attempt: i32,
    /// Attempts allowed.
    #[diesel(sql_type = Int4)]
    pub max_attempts: i32,
    /// Per-attempt limit.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub timeout_ms: Option<i64>,
    /// Insert time.
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    /// When it became due.
    #[diesel(sql_type = Timestamptz)]
    pub scheduled_at: DateTime<Utc>,
    /// This claim's time.
    #[diesel(sql_type = Timestamptz)]
    pub attempted_at: DateTime<Utc>,
}

// The claimable rows are locked in a sub-select whose ids become an array, and the update
// finds them through the primary key (`id = ANY(...)`). Joined to a CTE instead, the
// prepared statement's generic plan cannot know the batch is small (`LIMIT $2`) and hashes
// the whole table, so Postgres plans every claim afresh; this form has one plan, good for
// every batch size, and it is reused.
const FETCH_AVAILABLE: &str = "\
UPDATE jobs
SET state = 'running',
    attempt = jobs.attempt + 1,
    attempted_at = COALESCE($4::timestamptz, now()),
    attempted_by = array_append(jobs.attempted_by, $3)
WHERE jobs.id = ANY (ARRAY(
    SELECT id FROM jobs
    WHERE state = 'available' AND queue = $1
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
    ORDER BY priority, scheduled_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))
RETURNING jobs.id, jobs.kind, jobs.queue, jobs.args::text AS args, jobs.meta::text AS meta, jobs.tags,
          jobs.priority, jobs.attempt, jobs.max_attempts, jobs.timeout_ms, jobs.created_at,
          jobs.scheduled_at, jobs.attempted_at";

/// Claims up to `limit` available jobs of `queue` for `node`, in one statement: the
/// highest priority first, then the longest due, skipping rows other workers hold. The
/// claimed rows become `running` with their attempt incremented and `node` appended to
/// `attempted_by`. A paused queue yields nothing.
pub async fn fetch_available<C>(
    conn: &mut C,
    queue: &str,
    limit: i64,
    node: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    run_claim(conn, FETCH_AVAILABLE, queue, limit, node, now).await
}

/// The claim of [`fetch_available`] with its size written into the statement: for the
/// size a worker claims again and again (a queue's batch).
///
/// With `LIMIT $2` Postgres cannot tell a generic plan's cost from the batch size, guesses a
/// tenth of the table, finds the generic plan dearer than any custom one, and plans every
/// claim afresh (0.28 ms a claim, 7 % of a 400-job claim and more of smaller ones; see
/// docs/benchmarks.md). With the size in the text, the prepared statement's generic plan
/// is the custom one and is reused. One statement per distinct size, prepared on each
/// connection that claims it; past [`MAX_BATCH_STATEMENTS`] sizes this falls back to
/// [`fetch_available`].
pub async fn fetch_batch<C>(
    conn: &mut C,
    queue: &str,
    batch: usize,
    node: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let limit = i64::try_from(batch).unwrap_or(i64::MAX);
    let sql = batch_statement(batch).unwrap_or(FETCH_AVAILABLE);
    run_claim(conn, sql, queue, limit, node, now).await
}

/// Runs a claim statement: [`FETCH_AVAILABLE`] or one of its fixed-size variants, which
/// take the same parameters (a variant's text has no `$2`, so the bound limit is not sent).
async fn run_claim<C>(
    conn: &mut C,
    sql: &'static str,
    queue: &str,
    limit: i64,
    node: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    Ok(CachedQuery::new(sql)
        .bind::<Text, _>(queue)
        .bind::<BigInt, _>(limit)
        .bind::<Text, _>(node)
        .bind::<Nullable<Timestamptz>, _>(now)
        .returning::<ClaimedRow>()
        .load(conn)
        .await?)
}

/// How many batch sizes get a claim statement of their own (each is kept for the life of the
/// process; they come from queue configurations, so a process sees a handful).
pub const MAX_BATCH_STATEMENTS: usize = 32;

/// The claim statement for `batch`, built once per size.
fn batch_statement(batch: usize) -> Option<&'static str> {
    static STATEMENTS: std::sync::Mutex<Vec<(usize, &'static str)>> = std::sync::Mutex::new(Vec::new());
    let mut statements = STATEMENTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, sql)) = statements.iter().find(|(n, _)| *n == batch) {
        return Some(sql);
    }
    if statements.len() >= MAX_BATCH_STATEMENTS {
        return None;
    }
    let sql: &'static str =
        Box::leak(FETCH_AVAILABLE.replace("LIMIT $2", &format!("LIMIT {batch}")).into_boxed_str());
    statements.push((batch, sql));
    Some(sql)
}

/// What happened to one claimed job, to be written back.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Job id.
    pub id: i64,
    /// Its queue (for the per-minute counters).
    pub queue: std::sync::Arc<str>,
    /// The attempt it was claimed with: the write applies only if the row is still
    /// `running` at this attempt.
    pub attempt: i32,
    /// The new state: completed, retryable, scheduled (snoozed), available (handed back
    /// at shutdown), discarded or cancelled.
    pub state: JobState,
    /// The result as JSON text.
    pub result: Option<String>,
    /// An entry to append to `errors`, as JSON text.
    pub error: Option<String>,
    /// Run again this long after now (retry backoff, snooze).
    pub delay_ms: Option<i64>,
    /// Whether the attempt is given back (snooze, shutdown).
    pub give_back_attempt: bool,
    /// Delete the row instead of writing it (delete-on-completion queues, completed jobs).
    pub delete: bool,
}

/// The fence every completion statement applies: the row is the claimed one, still
/// `running` at the claimed attempt.
///
/// The state is compared as text on purpose. Written `jobs.state = 'running'`, the
/// predicate matches the partial index `jobs_running_idx`, and when the statistics were
/// gathered while few jobs ran (a freshly loaded queue, say) the planner takes that index
/// as "one row" and drives a nested loop from it, re-reading the whole batch for every
/// running row: a 2,000-row completion took seconds and the worker stalled behind it. As
/// text, only the primary key can find the rows, and every plan is a lookup per batch row.
macro_rules! running_at_attempt {
    () => {
        "jobs.id = c.id AND jobs.attempt = c.attempt AND jobs.state::text = 'running'"
    };
}

// A job whose cancellation was requested while it ran ends cancelled unless it succeeded.
const NEW_STATE: &str = "CASE WHEN jobs.cancel_requested_at IS NOT NULL AND c.state IN ('retryable', 'scheduled', 'available') \
     THEN 'cancelled'::job_state ELSE c.state::job_state END";

static COMPLETE_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "\
UPDATE jobs
SET state = {NEW_STATE},
    finalized_at = CASE WHEN ({NEW_STATE}) IN ('completed', 'discarded', 'cancelled') THEN clock.now END,
    result = COALESCE(c.result::jsonb, jobs.result),
    errors = CASE WHEN c.error IS NULL THEN jobs.errors ELSE jobs.errors || jsonb_build_array(c.error::jsonb) END,
    scheduled_at = CASE WHEN c.delay_ms IS NULL THEN jobs.scheduled_at
                        ELSE clock.now + c.delay_ms * interval '1 millisecond' END,
    attempt = jobs.attempt - c.give_back::int
FROM unnest($1::int8[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::bool[])
         AS c(id, attempt, state, result, error, delay_ms, give_back),
     (SELECT COALESCE($8::timestamptz, now()) AS now) AS clock
WHERE {fence}
RETURNING jobs.id",
        fence = running_at_attempt!()
    )
});

// Completed and kept, the common case: three arrays and no per-row expressions. (A
// request to cancel does not change a success.)
const COMPLETE_SUCCEEDED: &str = concat!(
    "\
UPDATE jobs
SET state = 'completed', finalized_at = COALESCE($4::timestamptz, now()), result = COALESCE(c.result::jsonb, jobs.result)
FROM unnest($1::int8[], $2::int4[], $3::text[]) AS c(id, attempt, result)
WHERE ",
    running_at_attempt!(),
    "
RETURNING jobs.id"
);

const DELETE_COMPLETED: &str = concat!(
    "\
DELETE FROM jobs
USING unnest($1::int8[], $2::int4[]) AS c(id, attempt)
WHERE ",
    running_at_attempt!(),
    "
RETURNING jobs.id"
);

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Writes a batch of outcomes in at most three statements: successes kept, successes
/// deleted (delete-on-completion queues), and every other outcome. Each write is fenced: it
/// applies only to a row still `running` at the claimed attempt, so a completion arriving
/// after the job was rescued (and perhaps claimed again) changes nothing. Returns the ids
/// that applied.
///
/// The statements are prepared once per connection. Whatever the statistics say, their
/// plans find the rows by primary key (see `running_at_attempt!`).
pub async fn complete_many<C>(
    conn: &mut C,
    completions: &[Completion],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let mut succeeded = Vec::new();
    let mut deleted = Vec::new();
    let mut other = Vec::new();
    for c in completions {
        match (c.state, c.delete) {
            (JobState::Completed, true) => deleted.push(c),
            (JobState::Completed, false) => succeeded.push(c),
            _ => other.push(c),
        }
    }
    let mut applied = Vec::with_capacity(completions.len());
    if !succeeded.is_empty() {
        let id: Vec<i64> = succeeded.iter().map(|c| c.id).collect();
        let attempt: Vec<i32> = succeeded.iter().map(|c| c.attempt).collect();
        let result: Vec<Option<&str>> = succeeded.iter().map(|c| c.result.as_deref()).collect();
        let rows: Vec<Id> = CachedQuery::new(COMPLETE_SUCCEEDED)
            .bind::<Array<BigInt>, _>(id)
            .bind::<Array<Int4>, _>(attempt)
            .bind::<Array<Nullable<Text>>, _>(result)
            .bind::<Nullable<Timestamptz>, _>(now)
            .load(conn)
            .await?;
        applied.extend(rows.into_iter().map(|r| r.id));
    }
    if !deleted.is_empty() {
        let id: Vec<i64> = deleted.iter().map(|c| c.id).collect();
        let attempt: Vec<i32> = deleted.iter().map(|c| c.attempt).collect();
        let rows: Vec<Id> = CachedQuery::new(DELETE_COMPLETED)
            .bind::<Array<BigInt>, _>(id)
            .bind::<Array<Int4>, _>(attempt)
            .load(conn)
            .await?;
        applied.extend(rows.into_iter().map(|r| r.id));
    }
    if !other.is_empty() {
        let n = other.len();
        let (mut id, mut attempt, mut state, mut result, mut error, mut delay, mut give_back) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for c in &other {
            id.push(c.id);
            attempt.push(c.attempt);
            state.push(c.state.as_str());
            result.push(c.result.as_deref());
            error.push(c.error.as_deref());
            delay.push(c.delay_ms);
            give_back.push(c.give_back_attempt);
        }
        let rows: Vec<Id> = CachedQuery::new(COMPLETE_SQL.as_str())
            .bind::<Array<BigInt>, _>(id)
            .bind::<Array<Int4>, _>(attempt)
            .bind::<Array<Text>, _>(state)
            .bind::<Array<Nullable<Text>>, _>(result)
            .bind::<Array<Nullable<Text>>, _>(error)
            .bind::<Array<Nullable<BigInt>>, _>(delay)
            .bind::<Array<Bool>, _>(give_back)
            .bind::<Nullable<Timestamptz>, _>(now)
            .load(conn)
            .await?;
        applied.extend(rows.into_iter().map(|r| r.id));
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use diesel_async::{AsyncPgConnection, RunQueryDsl};

    use super::{
        COMPLETE_SQL, COMPLETE_SUCCEEDED, DELETE_COMPLETED, FETCH_AVAILABLE, fetch_available, fetch_batch,
    };
    use crate::db::explain::explain_execute;
    use crate::db::jobs::{NewJob, insert_many};
    use crate::testing::TestDatabase;

    async fn plan(conn: &mut AsyncPgConnection, mode: &str, execute: &str) -> String {
        diesel::sql_query(format!("SET plan_cache_mode = {mode}")).execute(conn).await.expect("set mode");
        explain_execute(conn, execute).await
    }

    async fn queue_of_20_000(db: &TestDatabase) -> AsyncPgConnection {
        let mut conn = db.connect().await.expect("connect");
        let batch: Vec<NewJob> = (0..5_000).map(|_| NewJob::new("plan.job", "plans", "{}")).collect();
        for _ in 0..4 {
            insert_many(&mut conn, &batch, None).await.expect("insert");
        }
        diesel::sql_query("ANALYZE jobs").execute(&mut conn).await.expect("analyze");
        conn
    }

    /// The claim's generic plan, the one a prepared statement reuses, must not depend on the
    /// batch size: index scans only, never a pass over the table.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_claim_plan_reads_only_what_it_claims() {
        let db = TestDatabase::new().await.expect("database");
        let mut conn = queue_of_20_000(&db).await;
        diesel::sql_query(format!("PREPARE claim AS {FETCH_AVAILABLE}"))
            .execute(&mut conn)
            .await
            .expect("prepare");
        for mode in ["force_generic_plan", "force_custom_plan"] {
            let plan = plan(&mut conn, mode, "claim('plans', 100, 'planner', NULL)").await;
            assert!(
                plan.contains("jobs_claim_idx") && plan.contains("jobs_pkey") && !plan.contains("Seq Scan"),
                "{mode}:\n{plan}"
            );
        }
    }

    #[derive(diesel::QueryableByName)]
    struct PlanCounts {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        generic_plans: i64,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        custom_plans: i64,
    }

    async fn plan_counts(conn: &mut AsyncPgConnection, needle: &str) -> PlanCounts {
        diesel::sql_query(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%' || $1 || '%'",
        )
        .bind::<diesel::sql_types::Text, _>(needle)
        .get_result(conn)
        .await
        .expect("the claim is a prepared statement")
    }

    /// A claim of a queue's batch size is planned once per connection and reused; the same
    /// claim with the size as a parameter is planned afresh every time (its generic plan
    /// guesses a tenth of the table).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_claim_reuses_its_plan() {
        let db = TestDatabase::new().await.expect("database");
        let mut conn = queue_of_20_000(&db).await;
        for _ in 0..8 {
            assert_eq!(fetch_batch(&mut conn, "plans", 37, "planner", None).await.expect("claim").len(), 37);
            assert_eq!(
                fetch_available(&mut conn, "plans", 37, "planner", None).await.expect("claim").len(),
                37
            );
        }
        let batch = plan_counts(&mut conn, "LIMIT 37").await;
        assert!(batch.generic_plans >= 2, "generic {} custom {}", batch.generic_plans, batch.custom_plans);
        // diesel numbers the placeholders in the order they appear.
        let any = plan_counts(&mut conn, "LIMIT $").await;
        assert_eq!(
            (any.generic_plans, any.custom_plans),
            (0, 8),
            "the parameterised claim is planned each time"
        );
    }

    /// Statistics gathered while nothing ran say `jobs_running_idx` is empty; a plan that
    /// trusted them scanned it once per batch row. Every completion statement must find
    /// its rows by primary key instead, in generic and custom plans alike.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn completion_plans_use_the_primary_key_whatever_the_statistics() {
        let db = TestDatabase::new().await.expect("database");
        let mut conn = queue_of_20_000(&db).await;
        let claimed = fetch_available(&mut conn, "plans", 500, "planner", None).await.expect("claim");
        assert_eq!(claimed.len(), 500);

        let statements = [
            ("succeeded", COMPLETE_SUCCEEDED, "succeeded('{1}', '{1}', '{NULL}', NULL)"),
            ("deleted", DELETE_COMPLETED, "deleted('{1}', '{1}')"),
            (
                "other",
                COMPLETE_SQL.as_str(),
                "other('{1}', '{1}', '{retryable}', '{NULL}', '{NULL}', '{NULL}', '{f}', NULL)",
            ),
        ];
        for (name, sql, execute) in statements {
            diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(&mut conn).await.expect("prepare");
            let generic = plan(&mut conn, "force_generic_plan", execute).await;
            assert!(
                generic.contains("jobs_pkey") && !generic.contains("jobs_running_idx"),
                "{name}, generic plan:\n{generic}"
            );
            let custom = plan(&mut conn, "force_custom_plan", execute).await;
            assert!(!custom.contains("jobs_running_idx"), "{name}, custom plan:\n{custom}");
        }
    }
}
