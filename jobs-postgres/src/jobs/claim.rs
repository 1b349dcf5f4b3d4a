//! The claim: one statement takes a batch of available jobs, `FOR UPDATE SKIP LOCKED`.

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Int2, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{ClaimedJob, JobClaimParams, Result};

use crate::cached::CachedQuery;

/// The SQL types of a claim's columns, in the order of its `RETURNING`.
pub(crate) type ClaimedColumns = (
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
    Nullable<BigInt>,
);

/// A claimed row as decoded (by position); [`ClaimedJob`] is the driver-neutral copy.
#[derive(diesel::Queryable)]
pub(crate) struct ClaimedRow(
    i64,
    String,
    String,
    String,
    String,
    Vec<String>,
    i16,
    i32,
    i32,
    Option<i64>,
    DateTime<Utc>,
    DateTime<Utc>,
    DateTime<Utc>,
    Option<i64>,
);

impl From<ClaimedRow> for ClaimedJob {
    fn from(r: ClaimedRow) -> ClaimedJob {
        ClaimedJob {
            id: r.0,
            kind: r.1,
            queue: r.2,
            args: r.3,
            meta: r.4,
            tags: r.5,
            priority: r.6,
            attempt: r.7,
            max_attempts: r.8,
            timeout_ms: r.9,
            created_at: r.10,
            scheduled_at: r.11,
            attempted_at: r.12,
            workflow_id: r.13,
        }
    }
}

/// What a claim statement sets and returns, after its `WHERE`: [`ClaimedColumns`] in order.
/// Its `$3` is the node, its `$4` the claim's time.
macro_rules! claim_update {
    ($where:expr) => {
        concat!(
            "UPDATE jobs
SET state = 'running',
    attempt = jobs.attempt + 1,
    attempted_at = COALESCE($4::timestamptz, now()),
    attempted_by = array_append(jobs.attempted_by, $3)
",
            $where,
            "
RETURNING jobs.id, jobs.kind, jobs.queue, jobs.args::text AS args, jobs.meta::text AS meta, jobs.tags,
          jobs.priority, jobs.attempt, jobs.max_attempts, jobs.timeout_ms, jobs.created_at,
          jobs.scheduled_at, jobs.attempted_at, jobs.workflow_id"
        )
    };
}
pub(crate) use claim_update;

// The claimable rows are locked in a sub-select whose ids become an array, and the update
// finds them through the primary key (`id = ANY(...)`). Joined to a CTE instead, the
// prepared statement's generic plan cannot know the batch is small (`LIMIT $2`) and hashes
// the whole table, so Postgres plans every claim afresh; this form has one plan, good for
// every batch size, and it is reused.
pub(crate) const FETCH_AVAILABLE: &str = claim_update!(
    "WHERE jobs.id = ANY (ARRAY(
    SELECT id FROM jobs
    WHERE state = 'available' AND queue = $1
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
    ORDER BY priority, scheduled_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))"
);

/// See [`JobClaimParams`]: the claim of a recurring size runs [`fetch_batch`], any other
/// [`fetch_available`].
pub(crate) async fn claim<C>(conn: &mut C, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let JobClaimParams { queue, limit, node, now, recurring_size, .. } = params;
    if recurring_size {
        fetch_batch(conn, queue, limit, node, now).await
    } else {
        fetch_available(conn, queue, i64::try_from(limit).unwrap_or(i64::MAX), node, now).await
    }
}

/// Claims up to `limit` available jobs of `queue` for `node`, in one statement: the
/// highest priority first, then the longest due, skipping rows other workers hold. The
/// claimed rows become `running` with their attempt incremented and `node` appended to
/// `attempted_by`. A paused queue yields nothing.
pub(crate) async fn fetch_available<C>(
    conn: &mut C,
    queue: &str,
    limit: i64,
    node: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
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
pub(crate) async fn fetch_batch<C>(
    conn: &mut C,
    queue: &str,
    batch: usize,
    node: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
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
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let rows: Vec<ClaimedRow> = CachedQuery::new(sql)
        .bind::<Text, _>(queue)
        .bind::<BigInt, _>(limit)
        .bind::<Text, _>(node)
        .bind::<Nullable<Timestamptz>, _>(now)
        .returning::<ClaimedColumns>()
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(ClaimedJob::from).collect())
}

/// How many batch sizes get a claim statement of their own (each is kept for the life of the
/// process; they come from queue configurations, so a process sees a handful).
pub(crate) const MAX_BATCH_STATEMENTS: usize = 32;

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
