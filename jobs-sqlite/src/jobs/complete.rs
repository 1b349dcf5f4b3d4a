//! The completion: a batch of outcomes written in one transaction, one cached statement
//! per outcome, each fenced on the row still being `running` at the claimed attempt.

use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::{Completion, JobState, Result};

use crate::rows::Id;

/// The fence every completion statement applies.
macro_rules! running_at_attempt {
    () => {
        "id = ?1 AND attempt = ?2 AND state = 'running'"
    };
}

// Completed and kept, the common case. (A request to cancel does not change a success.)
const COMPLETE_SUCCEEDED: &str = concat!(
    "UPDATE jobs SET state = 'completed', finalized_at = ?4, result = COALESCE(?3, result) WHERE ",
    running_at_attempt!(),
    " RETURNING id"
);

const DELETE_COMPLETED: &str = concat!("DELETE FROM jobs WHERE ", running_at_attempt!(), " RETURNING id");

// The state an outcome writes: a job whose cancellation was requested while it ran ends
// cancelled unless it succeeded (?3 is the outcome's state). SQLite evaluates every SET
// expression against the row as it was, so `finalized_at` repeats it.
macro_rules! new_state {
    () => {
        "CASE WHEN cancel_requested_at IS NOT NULL AND ?3 IN ('retryable', 'scheduled', 'available') \
         THEN 'cancelled' ELSE ?3 END"
    };
}

// Every other outcome.
const COMPLETE_OTHER: &str = concat!(
    "UPDATE jobs SET state = ",
    new_state!(),
    ", finalized_at = CASE WHEN (",
    new_state!(),
    ") IN ('completed', 'discarded', 'cancelled') THEN ?8 END,
    result = COALESCE(?4, result),
    errors = CASE WHEN ?5 IS NULL THEN errors ELSE json_insert(errors, '$[#]', json(?5)) END,
    scheduled_at = CASE WHEN ?6 IS NULL THEN scheduled_at ELSE ?8 + ?6 END,
    attempt = attempt - ?7
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
    for c in completions {
        let row: Option<Id> = match (c.state, c.delete) {
            (JobState::Completed, true) => diesel::sql_query(DELETE_COMPLETED)
                .bind::<BigInt, _>(c.id)
                .bind::<Integer, _>(c.attempt)
                .load::<Id>(conn)?
                .pop(),
            (JobState::Completed, false) => diesel::sql_query(COMPLETE_SUCCEEDED)
                .bind::<BigInt, _>(c.id)
                .bind::<Integer, _>(c.attempt)
                .bind::<Nullable<Text>, _>(c.result.as_deref())
                .bind::<BigInt, _>(now_ms)
                .load::<Id>(conn)?
                .pop(),
            _ => diesel::sql_query(COMPLETE_OTHER)
                .bind::<BigInt, _>(c.id)
                .bind::<Integer, _>(c.attempt)
                .bind::<Text, _>(c.state.as_str())
                .bind::<Nullable<Text>, _>(c.result.as_deref())
                .bind::<Nullable<Text>, _>(c.error.as_deref())
                .bind::<Nullable<BigInt>, _>(c.delay_ms)
                .bind::<Bool, _>(c.give_back_attempt)
                .bind::<BigInt, _>(now_ms)
                .load::<Id>(conn)?
                .pop(),
        };
        applied.extend(row.map(|r| r.id));
    }
    Ok(applied)
}
