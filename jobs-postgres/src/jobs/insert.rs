//! Inserting jobs: one statement per batch, in input order, with the wake-up in the same
//! statement (delivered on commit) or left to the caller.

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bool, Bytea, Int2, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl as AsyncRunQueryDsl};
use jobs_driver::{Deduplicated, DriverError, Inserted, JobState, NewJob, Result};

use super::insert_rounds::{Holder, InsertedRow, KEY_ROUNDS, Rounds};
use crate::cached::CachedQuery;
use crate::notifications::available_channel;

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
RETURNING id, (state = 'available') AS wakes, unique_key,
          CASE WHEN $14::bool AND state = 'available'
               THEN pg_notify('",
            available_channel!(),
            "', queue) END AS notified"
        )
    };
}

/// A batch without uniqueness keys: a plain insert (an `ON CONFLICT` clause makes every
/// row a speculative insertion, measurably slower).
const INSERT_PLAIN: &str = insert_sql!("");

/// A batch with uniqueness keys: a row whose key is held is not inserted (and not
/// returned); [`HOLDERS`] then finds the job that holds it. `DO NOTHING` takes no lock on
/// the holder: `DO UPDATE` would lock it until the caller's transaction ends, and a running
/// holder's completion would wait that long (and every outcome batched with it).
const INSERT_UNIQUE: &str = insert_sql!(
    "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
DO NOTHING"
);

/// The jobs holding the keys `$1` (no lock: the statement's snapshot, a fresh one per
/// statement in `READ COMMITTED`, sees the holders the insert met).
const HOLDERS: &str = "\
SELECT id, unique_key FROM jobs
WHERE unique_key = ANY ($1) AND unique_key IS NOT NULL AND state = ANY (unique_states)";

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
const INSERT_SHARED: &str = concat!(
    "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                  created_at, scheduled_at)
SELECT shared.state, $2, $3, u.args::jsonb, shared.meta, shared.tags, $6, $7, $8, shared.now, shared.due
FROM (SELECT CASE WHEN due > now THEN 'scheduled'::job_state ELSE 'available'::job_state END AS state,
             now, due, meta, tags,
             CASE WHEN $12::bool AND due <= now THEN pg_notify('",
    available_channel!(),
    "', $3) END AS notified
      FROM (SELECT clock.now, $4::jsonb AS meta, string_to_array($5, ',') AS tags,
                   COALESCE($9::timestamptz, clock.now + COALESCE($10::int8, 0) * interval '1 millisecond') AS due
            FROM (SELECT COALESCE($11::timestamptz, now()) AS now) AS clock) AS times
      OFFSET 0) AS shared,
     unnest($1::text[]) WITH ORDINALITY AS u(args, ord)
ORDER BY u.ord
RETURNING id, state = 'available' AS wakes, NULL::bytea AS unique_key"
);

pub(crate) fn states_literal(states: &[JobState]) -> String {
    let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    format!("{{{}}}", names.join(","))
}

/// The insert statement for `rows`, its parameters borrowed from them (no per-job copies).
fn insert_query<'a>(rows: &[&'a NewJob], now: Option<DateTime<Utc>>, notify: bool) -> CachedQuery<'a> {
    if let (true, Some(&first)) = (NewJob::all_differ_only_in_args(rows.iter().copied()), rows.first()) {
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

/// Inserts jobs in one statement, inside whatever transaction `conn` is in.
///
/// Jobs whose uniqueness key is held by a job in one of its unique states are not
/// inserted; their entry returns that job's id with `existing: true`. The holder is never
/// locked: a duplicate enqueued in a transaction that stays open does not hold up the
/// holder's completion. The statement notifies the workers of each queue that received
/// available jobs, on commit.
///
/// Postgres serializes the commits of transactions that notify (a cluster-wide lock held
/// through the commit's flush), so many small notifying transactions at once commit one
/// after another. Through a pool, the driver rations wake-ups instead (`wakeups.rs`).
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

/// The insert statement, notifying from it only when `notify` is true. Returns the jobs'
/// entries and the queues that received available jobs. [`insert_many`] is this with
/// `notify`; on a connection outside a transaction the insert commits on its own, for a
/// caller that wakes the queues itself (the `&Pool` enqueuer, see `wakeups.rs`: the first
/// insert of a window notifies from its statement, later ones get one trailing
/// [`notify_available`]).
pub(crate) async fn insert_many_committed<C>(
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
    let dedup = Deduplicated::new(jobs);
    let mut rounds = Rounds::new(&dedup);
    for _ in 0..KEY_ROUNDS {
        let returned: Vec<InsertedRow> =
            AsyncRunQueryDsl::load(insert_query(&rounds.rows(), now, notify), conn).await?;
        rounds.inserted(&returned)?;
        let keys = rounds.held_keys();
        if !keys.is_empty() {
            let holders: Vec<Holder> =
                AsyncRunQueryDsl::load(CachedQuery::new(HOLDERS).bind::<Array<Bytea>, _>(keys), conn).await?;
            rounds.holders(&holders);
        }
        if rounds.finished() {
            break;
        }
    }
    rounds.results()
}

const NOTIFY_AVAILABLE: &str =
    concat!("SELECT pg_notify('", available_channel!(), "', queue) FROM unnest($1::text[]) AS queue");

/// Tells the workers of `queues` that jobs are available (delivered when the current
/// transaction commits, at once outside one).
pub(crate) async fn notify_available<C>(conn: &mut C, queues: &[String]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let query = CachedQuery::new(NOTIFY_AVAILABLE).bind::<Array<Text>, _>(queues);
    AsyncRunQueryDsl::execute(query, conn).await?;
    Ok(())
}

/// [`insert_many`] on a synchronous diesel connection (`PgConnection`, r2d2).
pub(crate) fn insert_many_sync<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Pg>,
{
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let dedup = Deduplicated::new(jobs);
    let mut rounds = Rounds::new(&dedup);
    for _ in 0..KEY_ROUNDS {
        let returned: Vec<InsertedRow> =
            diesel::RunQueryDsl::load(insert_query(&rounds.rows(), now, true), conn)
                .map_err(DriverError::from)?;
        rounds.inserted(&returned)?;
        let keys = rounds.held_keys();
        if !keys.is_empty() {
            let query = CachedQuery::new(HOLDERS).bind::<Array<Bytea>, _>(keys);
            let holders: Vec<Holder> = diesel::RunQueryDsl::load(query, conn).map_err(DriverError::from)?;
            rounds.holders(&holders);
        }
        if rounds.finished() {
            break;
        }
    }
    Ok(rounds.results()?.0)
}
