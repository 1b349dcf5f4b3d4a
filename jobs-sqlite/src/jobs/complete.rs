//! The completion: a batch of outcomes written in one transaction, each fenced on the row
//! still being `running` at the claimed attempt. Successes (kept or deleted), nearly every
//! outcome, go in one statement per kind over a JSON array of `[id, attempt, result?]`;
//! the other outcomes, one cached statement each.

use diesel::sql_types::{BigInt, Integer, Nullable, SmallInt, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::{Completion, JobState, Result};

use crate::cached::CachedQuery;
use crate::rows::Id;

/// The fence every completion statement applies.
macro_rules! running_at_attempt {
    () => {
        "id = $1 AND attempt = $2 AND state || '' = 'running'"
    };
}

// The batch statements compare the state as text on purpose (`state || ''`). Written
// `state = 'running'`, the term matches the partial index `jobs_running_idx`, and when the
// statistics were gathered while no job ran (a freshly loaded queue, say) SQLite takes
// that index as empty, scans it, and walks the whole batch for every running row: a
// 400-job completion cost 250 µs per job (the plan test `completions_find_each_row_by_its_id`
// reproduces it). As text, only the primary key can find the rows.

// Completed and kept, the common case: `$1` is `[[id, attempt, result?], ...]` (a third
// element only when the handler returned a result). A request to cancel does not change a
// success.
// A success whose key another job took while it ran (its key not unique while running,
// unique once completed) completes and gives up its key: the unique index never fails the
// batch.
pub(crate) const COMPLETE_SUCCEEDED: &str = "\
UPDATE jobs
SET state = 'completed', finalized_at = $2,
    result = CASE WHEN json_array_length(c.value) > 2 THEN c.value -> '$[2]' ELSE jobs.result END,
    unique_key = CASE WHEN jobs.unique_key IS NOT NULL AND instr(jobs.unique_states, '\"completed\"') > 0
                           AND EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = jobs.unique_key
                                       AND instr(o.unique_states, '\"' || o.state || '\"') > 0 AND o.id <> jobs.id)
                      THEN NULL ELSE jobs.unique_key END
FROM json_each($1) AS c
WHERE jobs.id = c.value ->> '$[0]' AND jobs.attempt = c.value ->> '$[1]' AND jobs.state || '' = 'running'
RETURNING jobs.id";

// Completed on a delete-on-completion queue: `$1` as above. A job other jobs depend on
// stays (it completes as if kept): its dependents must read that it completed, where a
// job gone reads as cancelled (`jobs_driver::workflow`).
pub(crate) const DELETE_COMPLETED: &str = "\
DELETE FROM jobs WHERE id IN (
    SELECT j.id FROM json_each($1) AS c JOIN jobs AS j ON j.id = c.value ->> '$[0]'
    WHERE j.attempt = c.value ->> '$[1]' AND j.state || '' = 'running'
      AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.depends_on = j.id))
RETURNING id";

/// `[[id, attempt, result?], ...]` for `completions` (results are JSON text already).
fn successes_json<'a>(completions: impl Iterator<Item = &'a Completion>) -> String {
    let mut text = String::from("[");
    for c in completions {
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&format!("[{},{}", c.id, c.attempt));
        if let Some(result) = &c.result {
            text.push(',');
            text.push_str(result);
        }
        text.push(']');
    }
    text.push(']');
    text
}

// The state an outcome asks for ($3 is the outcome's state), as the Postgres driver's
// `REQUESTED_STATE` says: a success stands; an outcome that would run the job again is
// `cancelled` when its cancellation was requested while it ran; for a step a dependency
// failed while it ran, `pending` where its workflow holds and `cancelled` where it
// cancels (`cancelled_by_dependency!`); `pending` while it waits for a dependency a
// retry re-opened. SQLite evaluates every SET expression against the row as it was, so
// the expressions repeat it.
macro_rules! requested_state {
    () => {
        concat!(
            "(CASE WHEN $3 NOT IN ('retryable', 'scheduled', 'available') THEN $3 \
             WHEN cancel_requested_at IS NOT NULL THEN 'cancelled' \
             WHEN failed_on > 0 AND ",
            holds_on_failure!(),
            " THEN 'pending' WHEN failed_on > 0 THEN 'cancelled' \
             WHEN waiting_on > 0 THEN 'pending' ELSE $3 END)"
        )
    };
}

// Whether the outcome's job is cancelled because a dependency failed it.
macro_rules! cancelled_by_dependency {
    () => {
        concat!(
            "($3 IN ('retryable', 'scheduled', 'available') AND cancel_requested_at IS NULL AND failed_on > 0 AND NOT ",
            holds_on_failure!(),
            ")"
        )
    };
}

// Whether the requested state would take the job's uniqueness key while another job
// holds it (a duplicate enqueued while this one ran, its key not unique while running): a
// retry, a snooze or a hand-back that would break the unique index. Such a job is
// discarded instead, with a `unique_conflict` entry; the duplicate does the work.
macro_rules! conflict {
    () => {
        concat!(
            "(jobs.unique_key IS NOT NULL AND instr(jobs.unique_states, '\"' || ",
            requested_state!(),
            " || '\"') > 0
              AND EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = jobs.unique_key AND o.unique_key IS NOT NULL
                          AND instr(o.unique_states, '\"' || o.state || '\"') > 0 AND o.id <> jobs.id))"
        )
    };
}

macro_rules! new_state {
    () => {
        concat!("(CASE WHEN ", conflict!(), " THEN 'discarded' ELSE ", requested_state!(), " END)")
    };
}

// The errors with the outcome's own entry (a hand-back's only while few are recorded).
macro_rules! own_entry {
    () => {
        concat!(
            "CASE WHEN $5 IS NULL OR ($7 <> 0 AND json_array_length(errors) >= ",
            jobs_driver::max_given_back_entries!(),
            ") THEN errors ELSE json_insert(errors, '$[#]', json($5)) END"
        )
    };
}

// The errors with the outcome's own entry, and a `unique_conflict` one where its key is
// held.
macro_rules! outcome_errors {
    () => {
        concat!(
            "(CASE WHEN ",
            conflict!(),
            "
             THEN json_insert(",
            own_entry!(),
            ", '$[#]', json_object('attempt', attempt, 'at', json($9), 'error_type', 'unique_conflict',
                    'message', 'another job holds its uniqueness key: discarded instead of ' || $3))
             ELSE ",
            own_entry!(),
            " END)"
        )
    };
}

// Every other outcome, one at a time.
const COMPLETE_OTHER: &str = concat!(
    "UPDATE jobs SET state = ",
    new_state!(),
    ", finalized_at = CASE WHEN ",
    new_state!(),
    " IN ('completed', 'discarded', 'cancelled') THEN $8 END,
    result = COALESCE($4, result),
    errors = CASE WHEN ",
    cancelled_by_dependency!(),
    " AND NOT ",
    conflict!(),
    " THEN ",
    with_failed_dependency_entry!(outcome_errors!(), "$9"),
    " ELSE ",
    outcome_errors!(),
    " END,
    scheduled_at = CASE WHEN $6 IS NULL THEN scheduled_at ELSE $8 + $6 END,
    unique_key = CASE WHEN instr(unique_states, '\"discarded\"') > 0 AND ",
    conflict!(),
    " THEN NULL ELSE unique_key END,
    attempt = attempt - ($7 = 1),
    max_attempts = max_attempts + ($7 = 2)
WHERE ",
    running_at_attempt!(),
    " RETURNING id"
);

/// Writes a batch of outcomes at `now_ms`, in the caller's transaction. Each write applies
/// only to a row still `running` at the claimed attempt, so an outcome arriving after the
/// job was rescued (and perhaps claimed again) changes nothing. Returns the ids that
/// applied.
pub(crate) fn complete_many(
    conn: &mut SqliteConnection,
    completions: &[Completion],
    now_ms: i64,
) -> Result<Vec<i64>> {
    let mut applied = Vec::with_capacity(completions.len());
    let succeeded = |delete: bool| {
        completions.iter().filter(move |c| c.state == JobState::Completed && c.delete == delete)
    };
    let mut kept: Vec<&Completion> = succeeded(false).collect();
    let deleted: Vec<&Completion> = succeeded(true).collect();
    if !deleted.is_empty() {
        let rows: Vec<Id> = CachedQuery::new(DELETE_COMPLETED)
            .bind::<Text, _>(successes_json(deleted.iter().copied()))
            .bind::<BigInt, _>(now_ms)
            .load(conn)?;
        let gone: std::collections::HashSet<i64> = rows.into_iter().map(|r| r.id).collect();
        // The rest were fenced out, or are dependencies, kept: written as kept successes
        // (fenced again).
        kept.extend(deleted.into_iter().filter(|c| !gone.contains(&c.id)));
        applied.extend(gone);
    }
    if !kept.is_empty() {
        let rows: Vec<Id> = CachedQuery::new(COMPLETE_SUCCEEDED)
            .bind::<Text, _>(successes_json(kept.into_iter()))
            .bind::<BigInt, _>(now_ms)
            .load(conn)?;
        applied.extend(rows.into_iter().map(|r| r.id));
    }
    let at_json = crate::time::at_json(now_ms);
    for c in completions.iter().filter(|c| c.state != JobState::Completed) {
        let row: Option<Id> = CachedQuery::new(COMPLETE_OTHER)
            .bind::<BigInt, _>(c.id)
            .bind::<Integer, _>(c.attempt)
            .bind::<Text, _>(c.state.as_str())
            .bind::<Nullable<Text>, _>(c.result.as_deref())
            .bind::<Nullable<Text>, _>(c.error.as_deref())
            .bind::<Nullable<BigInt>, _>(c.delay_ms)
            .bind::<SmallInt, _>(c.attempt_change())
            .bind::<BigInt, _>(now_ms)
            .bind::<Text, _>(at_json.as_str())
            .load::<Id>(conn)?
            .pop();
        applied.extend(row.map(|r| r.id));
    }
    Ok(applied)
}
