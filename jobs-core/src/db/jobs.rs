//! Queries on the `jobs` table: insert, claim, complete, schedule, rescue, prune, and the
//! per-job actions (retry, cancel, delete).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Bytea, Int2, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl as AsyncRunQueryDsl};
use serde_json::Value;

use crate::db::cached::CachedQuery;
use crate::error::Result;
use crate::schema::jobs;
use crate::state::JobState;

/// A job row as stored, every column.
#[derive(Debug, Clone, PartialEq, Queryable, Selectable)]
#[diesel(table_name = jobs, check_for_backend(Pg))]
pub struct JobRow {
    /// The job's id.
    pub id: i64,
    /// Its state.
    pub state: JobState,
    /// The queue it runs on.
    pub queue: String,
    /// Its kind (which registered job runs it).
    pub kind: String,
    /// Its arguments.
    pub args: Value,
    /// Application metadata.
    pub meta: Value,
    /// Tags.
    pub tags: Vec<String>,
    /// Priority: lower runs first.
    pub priority: i16,
    /// Claims so far.
    pub attempt: i32,
    /// Claims allowed before it is discarded.
    pub max_attempts: i32,
    /// Per-attempt time limit in milliseconds.
    pub timeout_ms: Option<i64>,
    /// When it was inserted.
    pub created_at: DateTime<Utc>,
    /// When it is (or was) due.
    pub scheduled_at: DateTime<Utc>,
    /// When its latest attempt started.
    pub attempted_at: Option<DateTime<Utc>>,
    /// When it reached a final state.
    pub finalized_at: Option<DateTime<Utc>>,
    /// The node of each claim, oldest first.
    pub attempted_by: Vec<String>,
    /// One entry per failed attempt.
    pub errors: Value,
    /// What the handler returned.
    pub result: Option<Value>,
    /// When someone asked for the job to be cancelled.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Hash of its uniqueness key.
    pub unique_key: Option<Vec<u8>>,
    /// The states in which the key is unique.
    pub unique_states: Option<Vec<JobState>>,
}

/// A job to insert, already encoded. Built by the typed enqueue API
/// ([`crate::EnqueueRequest`]); use it directly to insert jobs of several kinds at once.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The job kind (borrowed for typed jobs: their kind is a constant).
    pub kind: Cow<'static, str>,
    /// The queue (borrowed when it is the kind's default).
    pub queue: Cow<'static, str>,
    /// The arguments as JSON text.
    pub args: String,
    /// Metadata as a JSON object's text (borrowed `{}` when there is none).
    pub meta: Cow<'static, str>,
    /// Tags (validated: letters, digits and `_ - . :`).
    pub tags: Vec<String>,
    /// Priority: lower runs first.
    pub priority: i16,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Per-attempt time limit in milliseconds.
    pub timeout_ms: Option<i64>,
    /// Run at this time (absolute).
    pub run_at: Option<DateTime<Utc>>,
    /// Run after this many milliseconds, counted on the database clock.
    pub delay_ms: Option<i64>,
    /// The uniqueness key's hash and the states in which it is unique.
    pub unique: Option<(Vec<u8>, Vec<JobState>)>,
}

impl NewJob {
    /// A job of `kind` on `queue` with `args` (JSON text) and every other field at its
    /// default: no metadata or tags, priority 0, the default attempts, no timeout, due now.
    /// For rows that do not come from a typed job (the CLI, tests); typed jobs are built
    /// with `build`/`enqueue`, which also validate.
    pub fn new(kind: impl Into<String>, queue: impl Into<String>, args: impl Into<String>) -> NewJob {
        NewJob {
            kind: Cow::Owned(kind.into()),
            queue: Cow::Owned(queue.into()),
            args: args.into(),
            meta: Cow::Borrowed("{}"),
            tags: Vec::new(),
            priority: 0,
            max_attempts: crate::DEFAULT_MAX_ATTEMPTS,
            timeout_ms: None,
            run_at: None,
            delay_ms: None,
            unique: None,
        }
    }
}

/// What inserting one job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// The new job's id, or the id of the job that already held the uniqueness key.
    pub id: i64,
    /// `true` when nothing was inserted because a job with the same uniqueness key exists.
    pub existing: bool,
}

/// One row returned by an insert statement: `id, existing, wakes`.
#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Bool)]
    existing: bool,
    #[diesel(sql_type = Bool)]
    wakes: bool,
}

/// The insert statement, with `$conflict` between the `SELECT` and `RETURNING`.
///
/// One plain `INSERT … SELECT FROM unnest(…)`: rows go in input order (`ORDER BY ord`), so
/// new ids ascend with the input. Each returned row says whether it is available now
/// (`wakes`). When `$14` is true the statement also sends the wake-up itself: a
/// `pg_notify` per available row, which Postgres folds into one notification per queue and
/// delivers with the commit (never after a rollback). The same statement as a chain of
/// CTEs (inputs, due times, the insert, the notifications) cost about 14 % more per job
/// (docs/benchmarks.md).
macro_rules! insert_sql {
    ($conflict:literal) => {
        concat!(
            "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                  created_at, scheduled_at, unique_key, unique_states)
SELECT CASE WHEN due.at > clock.now THEN 'scheduled'::job_state ELSE 'available'::job_state END,
       u.kind, u.queue, u.args::jsonb, u.meta::jsonb, string_to_array(u.tags, ','), u.priority,
       u.max_attempts, u.timeout_ms, clock.now, due.at, u.unique_key, u.unique_states::job_state[]
FROM (SELECT COALESCE($13::timestamptz, now()) AS now) AS clock,
     unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int2[], $7::int4[],
            $8::int8[], $9::timestamptz[], $10::int8[], $11::bytea[], $12::text[])
         WITH ORDINALITY AS u(kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                              run_at, delay_ms, unique_key, unique_states, ord),
     LATERAL (SELECT COALESCE(u.run_at, clock.now + COALESCE(u.delay_ms, 0) * interval '1 millisecond') AS at) AS due
ORDER BY u.ord
",
            $conflict,
            "
RETURNING id, (xmax <> 0) AS existing, (state = 'available' AND xmax = 0) AS wakes,
          CASE WHEN $14::bool AND state = 'available' AND xmax = 0
               THEN pg_notify('jobs_available', queue) END AS notified"
        )
    };
}

/// A batch without uniqueness keys: a plain insert (an `ON CONFLICT` clause makes every
/// row a speculative insertion, measurably slower).
const INSERT_PLAIN: &str = insert_sql!("");

/// A batch with uniqueness keys: a row whose key is held comes back as the existing job.
const INSERT_UNIQUE: &str = insert_sql!(
    "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
DO UPDATE SET unique_key = EXCLUDED.unique_key"
);

/// A batch whose jobs differ only in their arguments (one kind, queue, metadata, tags,
/// priority, attempts, timeout and due time, no uniqueness key): everything but the
/// arguments goes as one value, not as an array of copies. Single-job enqueues and most
/// batches take this form; it costs about a fifth less per job than [`INSERT_PLAIN`]
/// (docs/benchmarks.md), which decodes and unnests thirteen arrays.
///
/// The shared values (state, due time, metadata, tags, and the wake-up when `$12` is true:
/// one `pg_notify` for the batch) are computed once, in a subquery that `OFFSET 0` keeps
/// the planner from merging into the per-row select (merged, each row would parse the
/// metadata and compute the due time again). Its `notified` column is never read: a
/// column calling a volatile function stays in the subquery and runs once. Rows come back
/// as `id, existing, wakes`, like the other two statements'.
const INSERT_SHARED: &str = "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                  created_at, scheduled_at)
SELECT shared.state, $2, $3, u.args::jsonb, shared.meta, shared.tags, $6, $7, $8, shared.now, shared.due
FROM (SELECT CASE WHEN due > now THEN 'scheduled'::job_state ELSE 'available'::job_state END AS state,
             now, due, meta, tags,
             CASE WHEN $12::bool AND due <= now THEN pg_notify('jobs_available', $3) END AS notified
      FROM (SELECT clock.now, $4::jsonb AS meta, string_to_array($5, ',') AS tags,
                   COALESCE($9::timestamptz, clock.now + COALESCE($10::int8, 0) * interval '1 millisecond') AS due
            FROM (SELECT COALESCE($11::timestamptz, now()) AS now) AS clock) AS times
      OFFSET 0) AS shared,
     unnest($1::text[]) WITH ORDINALITY AS u(args, ord)
ORDER BY u.ord
RETURNING id, false AS existing, state = 'available' AS wakes";

/// The batch after removing in-batch duplicates of a uniqueness key (which the upsert
/// cannot take twice): `rows` go to the database, `slot[i]` says which of them input `i`
/// maps to.
struct Deduplicated<'a> {
    rows: Vec<&'a NewJob>,
    slot: Vec<usize>,
}

fn deduplicate(jobs: &[NewJob]) -> Deduplicated<'_> {
    let mut rows = Vec::with_capacity(jobs.len());
    let mut slot = Vec::with_capacity(jobs.len());
    let mut first_with_key: std::collections::HashMap<&[u8], usize> = Default::default();
    for job in jobs {
        if let Some((key, _)) = &job.unique
            && let Some(&row) = first_with_key.get(key.as_slice())
        {
            slot.push(row);
            continue;
        }
        if let Some((key, _)) = &job.unique {
            first_with_key.insert(key.as_slice(), rows.len());
        }
        slot.push(rows.len());
        rows.push(job);
    }
    Deduplicated { rows, slot }
}

fn states_literal(states: &[JobState]) -> String {
    let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    format!("{{{}}}", names.join(","))
}

/// Whether `rows` differ only in their arguments and carry no uniqueness key (see
/// [`INSERT_SHARED`]).
fn shares_all_but_args(rows: &[&NewJob]) -> bool {
    let Some((first, rest)) = rows.split_first() else { return false };
    first.unique.is_none()
        && rest.iter().all(|job| {
            job.unique.is_none()
                && job.kind == first.kind
                && job.queue == first.queue
                && job.meta == first.meta
                && job.tags == first.tags
                && job.priority == first.priority
                && job.max_attempts == first.max_attempts
                && job.timeout_ms == first.timeout_ms
                && job.run_at == first.run_at
                && job.delay_ms == first.delay_ms
        })
}

/// The insert statement for `rows`, its parameters borrowed from them (no per-job copies).
fn insert_query<'a>(rows: &[&'a NewJob], now: Option<DateTime<Utc>>, notify: bool) -> CachedQuery<'a> {
    if let (true, Some(&first)) = (shares_all_but_args(rows), rows.first()) {
        let args: Vec<&str> = rows.iter().map(|job| job.args.as_str()).collect();
        return CachedQuery::new(INSERT_SHARED)
            .bind::<Array<Text>, _>(args)
            .bind::<Text, _>(&*first.kind)
            .bind::<Text, _>(&*first.queue)
            .bind::<Text, _>(&*first.meta)
            .bind::<Text, _>(first.tags.join(","))
            .bind::<Int2, _>(first.priority)
            .bind::<Int4, _>(first.max_attempts)
            .bind::<Nullable<BigInt>, _>(first.timeout_ms)
            .bind::<Nullable<Timestamptz>, _>(first.run_at)
            .bind::<Nullable<BigInt>, _>(first.delay_ms)
            .bind::<Nullable<Timestamptz>, _>(now)
            .bind::<Bool, _>(notify);
    }
    let n = rows.len();
    let mut kind = Vec::with_capacity(n);
    let mut queue = Vec::with_capacity(n);
    let mut args = Vec::with_capacity(n);
    let mut meta = Vec::with_capacity(n);
    let mut tags = Vec::with_capacity(n);
    let mut priority = Vec::with_capacity(n);
    let mut max_attempts = Vec::with_capacity(n);
    let mut timeout_ms = Vec::with_capacity(n);
    let mut run_at = Vec::with_capacity(n);
    let mut delay_ms = Vec::with_capacity(n);
    let mut unique_key = Vec::with_capacity(n);
    let mut unique_states = Vec::with_capacity(n);
    for &job in rows {
        kind.push(&*job.kind);
        queue.push(&*job.queue);
        args.push(job.args.as_str());
        meta.push(&*job.meta);
        tags.push(match job.tags.as_slice() {
            [] => std::borrow::Cow::Borrowed(""),
            [one] => std::borrow::Cow::Borrowed(one.as_str()),
            many => std::borrow::Cow::Owned(many.join(",")),
        });
        priority.push(job.priority);
        max_attempts.push(job.max_attempts);
        timeout_ms.push(job.timeout_ms);
        run_at.push(job.run_at);
        delay_ms.push(job.delay_ms);
        unique_key.push(job.unique.as_ref().map(|(key, _)| key.as_slice()));
        unique_states.push(job.unique.as_ref().map(|(_, states)| states_literal(states)));
    }
    let sql = if rows.iter().any(|job| job.unique.is_some()) { INSERT_UNIQUE } else { INSERT_PLAIN };
    CachedQuery::new(sql)
        .bind::<Array<Text>, _>(kind)
        .bind::<Array<Text>, _>(queue)
        .bind::<Array<Text>, _>(args)
        .bind::<Array<Text>, _>(meta)
        .bind::<Array<Text>, _>(tags)
        .bind::<Array<Int2>, _>(priority)
        .bind::<Array<Int4>, _>(max_attempts)
        .bind::<Array<Nullable<BigInt>>, _>(timeout_ms)
        .bind::<Array<Nullable<Timestamptz>>, _>(run_at)
        .bind::<Array<Nullable<BigInt>>, _>(delay_ms)
        .bind::<Array<Nullable<Bytea>>, _>(unique_key)
        .bind::<Array<Nullable<Text>>, _>(unique_states)
        .bind::<Nullable<Timestamptz>, _>(now)
        .bind::<Bool, _>(notify)
}

/// Maps the returned rows back to the inputs. The statement returns one row per row it
/// was given (a held key returns the existing job), in the order given (`ORDER BY ord`
/// feeds the insert, and `RETURNING` follows the insert). A later copy of a key already in
/// the batch maps to the first copy's job, as existing.
fn match_inserted(dedup: &Deduplicated<'_>, returned: &[InsertedRow]) -> Result<Vec<Inserted>> {
    if returned.len() != dedup.rows.len() {
        return Err(crate::Error::Database(diesel::result::Error::DeserializationError(
            format!("the insert returned {} rows for {} jobs", returned.len(), dedup.rows.len()).into(),
        )));
    }
    let mut seen = vec![false; returned.len()];
    Ok(dedup
        .slot
        .iter()
        .map(|&row| {
            let first_use = !std::mem::replace(&mut seen[row], true);
            Inserted { id: returned[row].id, existing: returned[row].existing || !first_use }
        })
        .collect())
}

/// Inserts jobs in one statement, inside whatever transaction `conn` is in.
///
/// Jobs whose uniqueness key is held by a job in one of its unique states are not
/// inserted; their entry returns that job's id with `existing: true`. The statement
/// notifies the workers of each queue that received available jobs, on commit.
///
/// Postgres serializes the commits of transactions that notify (a cluster-wide lock held
/// through the commit's flush), so many small notifying transactions at once commit one
/// after another. Outside a transaction, [`insert_many_autocommit`] avoids that.
pub async fn insert_many<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<Inserted>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let (inserted, _) = insert_many_committed(conn, jobs, now, true).await?;
    Ok(inserted)
}

/// [`insert_many`] on a connection that is not inside a transaction: the insert commits
/// on its own, then a second statement wakes the queues that received available jobs.
///
/// The wake-up then comes from a transaction that writes nothing, whose commit waits for
/// no flush, so concurrent inserts commit together (group commit) instead of one after
/// another. If that second statement fails, the jobs are in and workers find them at
/// their next poll.
pub async fn insert_many_autocommit<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<Inserted>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let (inserted, queues) = insert_many_committed(conn, jobs, now, false).await?;
    if !queues.is_empty()
        && let Err(e) = notify_available(conn, &queues).await
    {
        tracing::warn!(error = %e, "jobs inserted, but waking the workers failed; they find the jobs at their next poll");
    }
    Ok(inserted)
}

/// The insert statement, notifying from it only when `notify` is true. Returns the jobs'
/// entries and the queues that received available jobs. [`insert_many`] is this with
/// `notify`; on a connection outside a transaction the insert commits on its own, for a
/// caller that wakes the queues itself (the `&Pool` enqueuer, see `wakeups.rs`: the first
/// insert of a window notifies from its statement, later ones get one trailing
/// [`notify_available`]).
pub async fn insert_many_committed<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<DateTime<Utc>>,
    notify: bool,
) -> Result<(Vec<Inserted>, Vec<String>)>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    if jobs.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let dedup = deduplicate(jobs);
    let returned: Vec<InsertedRow> =
        AsyncRunQueryDsl::load(insert_query(&dedup.rows, now, notify), conn).await?;
    let inserted = match_inserted(&dedup, &returned)?;
    let mut queues: Vec<String> = Vec::new();
    for (job, row) in dedup.rows.iter().zip(&returned) {
        if row.wakes && !queues.iter().any(|q| **q == *job.queue) {
            queues.push(job.queue.to_string());
        }
    }
    Ok((inserted, queues))
}

const NOTIFY_AVAILABLE: &str = "SELECT pg_notify($2, queue) FROM unnest($1::text[]) AS queue";

/// Tells the workers of `queues` that jobs are available (delivered when the current
/// transaction commits, at once outside one).
pub async fn notify_available<C>(conn: &mut C, queues: &[String]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let query = CachedQuery::new(NOTIFY_AVAILABLE)
        .bind::<Array<Text>, _>(queues)
        .bind::<Text, _>(crate::db::control::AVAILABLE_CHANNEL);
    AsyncRunQueryDsl::execute(query, conn).await?;
    Ok(())
}

/// [`insert_many`] on a synchronous diesel connection (`PgConnection`, r2d2).
pub fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob], now: Option<DateTime<Utc>>) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Pg>,
{
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let dedup = deduplicate(jobs);
    let returned: Vec<InsertedRow> = diesel::RunQueryDsl::load(insert_query(&dedup.rows, now, true), conn)?;
    match_inserted(&dedup, &returned)
}

/// Rows breaking an invariant that the writers in this module keep and the table does not
/// check (the migration explains why): a queue or kind name outside 1 to 128 / 255
/// characters, a negative attempt, fewer than one attempt allowed, a timeout that is not
/// positive, errors that are not a JSON array, a running job without its claim time, or a
/// uniqueness key without its states (or the reverse).
const INVALID_ROWS: &str = "\
SELECT count(*) AS n FROM jobs
WHERE char_length(queue) NOT BETWEEN 1 AND 128
   OR char_length(kind) NOT BETWEEN 1 AND 255
   OR attempt < 0
   OR max_attempts < 1
   OR timeout_ms <= 0
   OR jsonb_typeof(errors) <> 'array'
   OR (state = 'running' AND attempted_at IS NULL)
   OR (unique_key IS NULL) <> (unique_states IS NULL)";

/// How many rows break an invariant of [`INVALID_ROWS`]; the fault tests assert none do
/// after kills and restarts. A full scan: for tests and health checks, not a hot path.
pub async fn count_invalid_rows<C>(conn: &mut C) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let count: Count = AsyncRunQueryDsl::get_result(diesel::sql_query(INVALID_ROWS), conn).await?;
    Ok(count.n)
}

/// Loads one job.
pub async fn get<C>(conn: &mut C, id: i64) -> Result<Option<JobRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(AsyncRunQueryDsl::get_result(jobs::table.find(id).select(JobRow::as_select()), conn)
        .await
        .optional()?)
}

/// The jobs waiting to run (available, scheduled or retryable) of `kind`, on `queue`,
/// whose arguments contain `args` (JSON containment: a subset of the fields), each filter
/// applied when given; oldest first. For test assertions (`testing::assert_enqueued`).
pub async fn find_waiting<C>(
    conn: &mut C,
    kind: Option<&str>,
    queue: Option<&str>,
    args: Option<&serde_json::Value>,
) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    use diesel::PgJsonbExpressionMethods;
    let mut q = jobs::table
        .filter(jobs::state.eq_any([JobState::Available, JobState::Scheduled, JobState::Retryable]))
        .select(JobRow::as_select())
        .order(jobs::id)
        .into_boxed();
    if let Some(kind) = kind {
        q = q.filter(jobs::kind.eq(kind.to_owned()));
    }
    if let Some(queue) = queue {
        q = q.filter(jobs::queue.eq(queue.to_owned()));
    }
    if let Some(args) = args {
        q = q.filter(jobs::args.contains(args.clone()));
    }
    Ok(AsyncRunQueryDsl::load(q, conn).await?)
}
