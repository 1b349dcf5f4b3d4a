//! The completion: a batch of outcomes written back in at most four statements, each
//! fenced on the row still being `running` at the claimed attempt.

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Int2, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Completion, DriverError, JobState, Result};

use crate::cached::CachedQuery;
use crate::rows::Id;

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

// The state an outcome writes. A success stands (a request to cancel does not change
// it). An outcome that would run the job again (a failure to retry, a snooze, a
// hand-back) is, instead:
// - `cancelled`, when its cancellation was requested while it ran;
// - for a workflow's step that a dependency failed while it ran (that dependency was
//   retried, then failed): never run again past it. In a workflow that holds, it waits
//   in `pending` for a person; in one that cancels, it is cancelled with an entry naming
//   the dependency (`CANCELLED_BY_DEPENDENCY`), as a settle cancels a waiting step, so
//   that a retry of the dependency brings it back;
// - `pending` while it waits for a dependency (a retry of which re-opened its edge while
//   it ran), released when the dependency finishes.
const REQUESTED_STATE: &str = concat!(
    "CASE WHEN c.state NOT IN ('retryable', 'scheduled', 'available') THEN c.state \
     WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled' \
     WHEN jobs.failed_on > 0 AND ",
    holds_on_failure!("jobs"),
    " THEN 'pending' WHEN jobs.failed_on > 0 THEN 'cancelled' \
     WHEN jobs.waiting_on > 0 THEN 'pending' ELSE c.state END"
);

/// Whether the outcome's job is cancelled because a dependency failed it (see
/// `REQUESTED_STATE`).
const CANCELLED_BY_DEPENDENCY: &str = concat!(
    "(c.state IN ('retryable', 'scheduled', 'available') AND jobs.cancel_requested_at IS NULL \
      AND jobs.failed_on > 0 AND NOT ",
    holds_on_failure!("jobs"),
    ")"
);

/// Whether the requested state would take the job's uniqueness key while another job
/// holds it (a duplicate enqueued while this one ran, its key not unique while running):
/// a retry, a snooze or a hand-back that would break the unique index. Such a job is
/// discarded instead, with a `unique_conflict` entry: the duplicate does the work, and
/// the batch never fails on the index.
fn conflict() -> String {
    format!(
        "(jobs.unique_key IS NOT NULL AND ({REQUESTED_STATE})::job_state = ANY (jobs.unique_states)
          AND EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = jobs.unique_key AND o.unique_key IS NOT NULL
                      AND o.state = ANY (o.unique_states) AND o.id <> jobs.id))"
    )
}

pub(crate) static COMPLETE_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let conflict = conflict();
    let new_state = format!("CASE WHEN {conflict} THEN 'discarded' ELSE {REQUESTED_STATE} END");
    format!(
        "\
UPDATE jobs
SET state = ({new_state})::job_state,
    finalized_at = CASE WHEN ({new_state}) IN ('completed', 'discarded', 'cancelled') THEN clock.now END,
    result = COALESCE(c.result::jsonb, jobs.result),
    errors = CASE WHEN c.error IS NULL OR (c.give_back > 0 AND jsonb_array_length(jobs.errors) >= {cap})
                  THEN jobs.errors ELSE jobs.errors || jsonb_build_array(c.error::jsonb) END
             || CASE WHEN {conflict}
                     THEN jsonb_build_array(jsonb_build_object('attempt', jobs.attempt, 'at', clock.now,
                              'error_type', 'unique_conflict',
                              'message', 'another job holds its uniqueness key: discarded instead of ' || c.state))
                     ELSE '[]'::jsonb END
             || CASE WHEN {CANCELLED_BY_DEPENDENCY} AND NOT {conflict}
                     THEN {entry} ELSE '[]'::jsonb END,
    scheduled_at = CASE WHEN c.delay_ms IS NULL THEN jobs.scheduled_at
                        ELSE clock.now + c.delay_ms * interval '1 millisecond' END,
    attempt = jobs.attempt - (c.give_back = 1)::int,
    -- A job discarded for a key another job holds keeps it (a retry of it later finds the
    -- key held), unless discarded is one of its unique states: then it gives the key up.
    unique_key = CASE WHEN 'discarded'::job_state = ANY (jobs.unique_states) AND {conflict}
                      THEN NULL ELSE jobs.unique_key END,
    max_attempts = jobs.max_attempts + (c.give_back = 2)::int
FROM unnest($1::int8[], $2::int4[], $3::text[], $4::text[], $5::text[], $6::int8[], $7::int2[])
         AS c(id, attempt, state, result, error, delay_ms, give_back),
     (SELECT COALESCE($8::timestamptz, now()) AS now) AS clock
WHERE {fence}
RETURNING jobs.id",
        fence = running_at_attempt!(),
        cap = jobs_driver::MAX_GIVEN_BACK_ENTRIES,
        entry = failed_dependency_entry!("jobs", "clock.now"),
    )
});

// Completed and kept, the common case: three arrays and no per-row expressions. (A
// request to cancel does not change a success.) The row moves to `jobs_archive` in this
// statement: deleted from `jobs`, inserted there with its outcome. A row that holds its
// uniqueness key in `completed` is left to `COMPLETE_HELD` (see `archive.rs`).
pub(crate) const COMPLETE_SUCCEEDED: &str = concat!(
    "\
WITH moved AS (
    DELETE FROM jobs USING unnest($1::int8[], $2::int4[], $3::text[]) AS c(id, attempt, result)
    WHERE ",
    running_at_attempt!(),
    " AND NOT ",
    super::archive::holds_key!("jobs", "'completed'"),
    "
    RETURNING jobs.*, c.result AS outcome
)
INSERT INTO jobs_archive (",
    super::archive::job_columns!(),
    ")
SELECT id, 'completed', queue, kind, args, meta, tags, priority, attempt, max_attempts, timeout_ms,
       created_at, scheduled_at, attempted_at, COALESCE($4::timestamptz, now()), attempted_by, errors,
       COALESCE(outcome::jsonb, result), cancel_requested_at, unique_key, unique_states, workflow_id,
       waiting_on, failed_on
FROM moved
RETURNING id"
);

// The successes `COMPLETE_SUCCEEDED` left because they hold their key in `completed`:
// completed in place, in `jobs`. (Run only when that statement applied fewer rows than it
// was sent, so the common batch pays for one statement.) A success whose key another job
// took while it ran (its key not unique while running) completes and gives up its key: the
// unique index never fails the batch.
pub(crate) const COMPLETE_HELD: &str = concat!(
    "\
UPDATE jobs
SET state = 'completed', finalized_at = COALESCE($4::timestamptz, now()), result = COALESCE(c.result::jsonb, jobs.result),
    unique_key = CASE WHEN EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = jobs.unique_key AND o.unique_key IS NOT NULL
                                                        AND o.state = ANY (o.unique_states) AND o.id <> jobs.id)
                      THEN NULL ELSE jobs.unique_key END
FROM unnest($1::int8[], $2::int4[], $3::text[]) AS c(id, attempt, result)
WHERE ",
    running_at_attempt!(),
    " AND ",
    super::archive::holds_key!("jobs", "'completed'"),
    "
RETURNING jobs.id"
);

// A job other jobs depend on stays (it completes as if kept): its dependents must read
// that it completed, where a job gone reads as cancelled (`jobs_driver::workflow`).
// `depended_on` is the mark of an insert that added an edge while the job was unfinished:
// its lock made this wait for that insert's commit, and the row's latest version, read
// after the wait, has the mark where the edge is past this statement's snapshot.
pub(crate) const DELETE_COMPLETED: &str = concat!(
    "\
DELETE FROM jobs
USING unnest($1::int8[], $2::int4[]) AS c(id, attempt)
WHERE ",
    running_at_attempt!(),
    "
  AND NOT jobs.depended_on
  AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.depends_on = jobs.id)
RETURNING jobs.id"
);

/// Writes a batch of outcomes in at most three statements (four when a success holds its
/// key): successes kept (archived), successes deleted (delete-on-completion queues), and
/// every other outcome. Each write is fenced: it
/// applies only to a row still `running` at the claimed attempt, so a completion arriving
/// after the job was rescued (and perhaps claimed again) changes nothing. Returns the ids
/// that applied.
///
/// The statements are prepared once per connection. Whatever the statistics say, their
/// plans find the rows by primary key (see `running_at_attempt!`).
pub(crate) async fn complete_many<C>(
    conn: &mut C,
    completions: &[Completion],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
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
    // In id order, as every statement that locks several jobs takes them (an insert of a
    // step locks the jobs it depends on so): two never wait for each other in a circle.
    for part in [&mut succeeded, &mut deleted, &mut other] {
        part.sort_unstable_by_key(|c| c.id);
    }
    let mut applied = Vec::with_capacity(completions.len());
    if !deleted.is_empty() {
        let id: Vec<i64> = deleted.iter().map(|c| c.id).collect();
        let attempt: Vec<i32> = deleted.iter().map(|c| c.attempt).collect();
        let rows: Vec<Id> = CachedQuery::new(DELETE_COMPLETED)
            .bind::<Array<BigInt>, _>(id)
            .bind::<Array<Int4>, _>(attempt)
            .load(conn)
            .await?;
        let gone: std::collections::HashSet<i64> = rows.into_iter().map(|r| r.id).collect();
        // The rest were fenced out, or are dependencies, kept: written as kept successes
        // (fenced again).
        succeeded.extend(deleted.into_iter().filter(|c| !gone.contains(&c.id)));
        succeeded.sort_unstable_by_key(|c| c.id);
        applied.extend(gone);
    }
    if !succeeded.is_empty() {
        let mut moved = successes(conn, COMPLETE_SUCCEEDED, &succeeded, now).await?;
        if moved.len() < succeeded.len() {
            let rest: Vec<&Completion> =
                succeeded.iter().copied().filter(|c| !moved.contains(&c.id)).collect();
            moved.extend(successes(conn, COMPLETE_HELD, &rest, now).await?);
        }
        applied.extend(moved);
    }
    if !other.is_empty() {
        match others(conn, &other, now).await {
            Ok(ids) => applied.extend(ids),
            // Two outcomes of the batch take one uniqueness key back (neither sees the
            // other): one at a time, each statement sees the last, and discards a job
            // whose key is held. (Inside a transaction the failed statement ended it: the
            // caller writes the batch again, row by row.)
            Err(DriverError::Database(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _,
            ))) if other.len() > 1 => {
                for c in &other {
                    applied.extend(others(conn, std::slice::from_ref(c), now).await?);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(applied)
}

/// Writes every outcome but a success (`COMPLETE_SQL`); returns the ids it applied to.
async fn others<C>(conn: &mut C, other: &[&Completion], now: Option<DateTime<Utc>>) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
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
    for c in other {
        id.push(c.id);
        attempt.push(c.attempt);
        state.push(c.state.as_str());
        result.push(c.result.as_deref());
        error.push(c.error.as_deref());
        delay.push(c.delay_ms);
        give_back.push(c.attempt_change());
    }
    let rows: Vec<Id> = CachedQuery::new(COMPLETE_SQL.as_str())
        .bind::<Array<BigInt>, _>(id)
        .bind::<Array<Int4>, _>(attempt)
        .bind::<Array<Text>, _>(state)
        .bind::<Array<Nullable<Text>>, _>(result)
        .bind::<Array<Nullable<Text>>, _>(error)
        .bind::<Array<Nullable<BigInt>>, _>(delay)
        .bind::<Array<Int2>, _>(give_back)
        .bind::<Nullable<Timestamptz>, _>(now)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Runs `sql` (`COMPLETE_SUCCEEDED` or `COMPLETE_HELD`) on the successes `done`; returns
/// the ids it applied to.
async fn successes<C>(
    conn: &mut C,
    sql: &'static str,
    done: &[&Completion],
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let id: Vec<i64> = done.iter().map(|c| c.id).collect();
    let attempt: Vec<i32> = done.iter().map(|c| c.attempt).collect();
    let result: Vec<Option<&str>> = done.iter().map(|c| c.result.as_deref()).collect();
    let rows: Vec<Id> = CachedQuery::new(sql)
        .bind::<Array<BigInt>, _>(id)
        .bind::<Array<Int4>, _>(attempt)
        .bind::<Array<Nullable<Text>>, _>(result)
        .bind::<Nullable<Timestamptz>, _>(now)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}
