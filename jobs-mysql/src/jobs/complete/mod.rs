//! The completion: a batch of outcomes written in at most three statements (successes
//! kept, successes deleted, every other outcome), each joining the batch — one JSON array
//! that `JSON_TABLE` turns into rows — to `jobs` by primary key, and each fenced on the row
//! still being `running` at the claimed attempt.
//!
//! MariaDB returns no rows from a multi-table `UPDATE` or `DELETE`, only how many it
//! changed. When that is the whole batch (nearly always), every outcome applied. When it
//! is fewer, the updates read back which of their rows carry their token, and the delete
//! reads which of its rows are still there (fenced out).

use diesel::sql_types::Text;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{Completion, JobState, Result};

use super::read::ids_json;
use crate::cached::CachedQuery;
use crate::rows::Id;
use crate::time::naive_opt;

/// The batch as rows: `$1` holds `[[id, attempt, …], …]`, with the columns after `attempt`
/// given by `$columns`.
macro_rules! batch {
    ($columns:literal) => {
        concat!(
            "JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$[0]', attempt INT PATH '$[1]'",
            $columns,
            ")) AS c STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = c.id AND j.attempt = c.attempt AND j.state = 'running'"
        )
    };
}

mod keys;
mod write;

use keys::{is_unique_violation, write_without_conflicts};
use write::{batch_json, write_part};

// Completed and kept, the common case: `[id, attempt, result?]`, the result as JSON text
// in a JSON string. A request to cancel does not change a success.
const COMPLETE_SUCCEEDED: &str = concat!(
    "UPDATE ",
    batch!(", result LONGTEXT PATH '$[2]'"),
    "
SET j.state = 'completed', j.finalized_at = COALESCE($2, UTC_TIMESTAMP(6)),
    j.result = COALESCE(c.result, j.result), j.lock_token = $3"
);

// Completed on a delete-on-completion queue: `[id, attempt]`. A job other jobs depend on
// stays (it completes as if kept): its dependents must read that it completed, where a
// job gone reads as cancelled (`jobs_driver::workflow`). An edge an open transaction is
// adding is waited for (InnoDB locks the subquery's rows; the insert share-locks the job
// too), then read: no mark is needed here, where Postgres needs `depended_on`.
const DELETE_COMPLETED: &str = concat!(
    "DELETE j FROM ",
    batch!(""),
    " WHERE NOT EXISTS (SELECT 1 FROM job_dependencies d FORCE INDEX (PRIMARY) WHERE d.depends_on = j.id)"
);

// The state an outcome writes, as the Postgres driver's `REQUESTED_STATE` says: a success
// stands; an outcome that would run the job again is `cancelled` when its cancellation
// was requested while it ran; for a step a dependency failed while it ran, `pending`
// where its workflow holds and `cancelled` where it cancels (with the entry of
// `failed_dependency_entry!`); `pending` while it waits for a dependency a retry
// re-opened. (No assignment below reads a column another one assigns: MySQL does not
// promise their order in a multi-table UPDATE.)
macro_rules! new_state {
    () => {
        concat!(
            "IF(c.state IN ('retryable', 'scheduled', 'available'), \
             IF(j.cancel_requested_at IS NOT NULL, 'cancelled', IF(j.failed_on > 0, IF(",
            holds_on_failure!(),
            ", 'pending', 'cancelled'), IF(j.waiting_on > 0, 'pending', c.state))), c.state)"
        )
    };
}

// The outcome's own entry appended (a hand-back's only while few are recorded).
macro_rules! own_errors {
    () => {
        concat!(
            "IF(c.error IS NULL OR (c.give_back > 0 AND JSON_LENGTH(j.errors) >= ",
            jobs_driver::max_given_back_entries!(),
            "), j.errors, JSON_MERGE_PRESERVE(j.errors, CONCAT('[', c.error, ']')))"
        )
    };
}

// Every other outcome: `[id, attempt, state, result?, error?, delay_ms?, give_back]`, with
// `give_back` as `Completion::attempt_change` says.
const COMPLETE_OTHER: &str = concat!(
    "UPDATE ",
    batch!(
        ", state VARCHAR(16) PATH '$[2]', result LONGTEXT PATH '$[3]', error LONGTEXT PATH '$[4]', \
         delay_ms BIGINT PATH '$[5]', give_back INT PATH '$[6]'"
    ),
    "
SET j.state = ",
    new_state!(),
    ",
    j.finalized_at = IF((",
    new_state!(),
    ") IN ('completed', 'discarded', 'cancelled'), COALESCE($2, UTC_TIMESTAMP(6)), NULL),
    j.result = COALESCE(c.result, j.result),
    j.errors = IF(c.state IN ('retryable', 'scheduled', 'available') AND j.cancel_requested_at IS NULL
                  AND j.failed_on > 0 AND NOT ",
    holds_on_failure!(),
    ", JSON_MERGE_PRESERVE(",
    own_errors!(),
    ", ",
    failed_dependency_entry!("COALESCE($2, UTC_TIMESTAMP(6))"),
    "), ",
    own_errors!(),
    "),
    j.scheduled_at = IF(c.delay_ms IS NULL, j.scheduled_at,
                        COALESCE($2, UTC_TIMESTAMP(6)) + INTERVAL (c.delay_ms * 1000) MICROSECOND),
    j.attempt = j.attempt - (c.give_back = 1),
    j.max_attempts = j.max_attempts + (c.give_back = 2),
    j.lock_token = $3"
);

/// Writes successes kept (`COMPLETE_SUCCEEDED`), discarding those whose key is now held.
async fn write_successes(
    conn: &mut AsyncMysqlConnection,
    part: &[&Completion],
    now: Option<chrono::NaiveDateTime>,
) -> Result<Vec<i64>> {
    match write_part(conn, COMPLETE_SUCCEEDED, part, false, now).await {
        Err(e) if is_unique_violation(&e) => {
            write_without_conflicts(conn, COMPLETE_SUCCEEDED, part, false, now).await
        }
        written => written,
    }
}

/// Writes a batch of outcomes. Each write applies only to a row still `running` at the
/// claimed attempt, so an outcome arriving after the job was rescued (and perhaps claimed
/// again) changes nothing. An outcome that would take a uniqueness key another job holds
/// is discarded instead (see [`write_without_conflicts`]; a success gives its key up). Returns the ids that applied.
pub(crate) async fn complete_many(
    conn: &mut AsyncMysqlConnection,
    completions: &[Completion],
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<Vec<i64>> {
    let now = naive_opt(now);
    let mut applied = Vec::with_capacity(completions.len());
    let succeeded: Vec<&Completion> =
        completions.iter().filter(|c| c.state == JobState::Completed && !c.delete).collect();
    if !succeeded.is_empty() {
        applied.extend(write_successes(conn, &succeeded, now).await?);
    }
    let other: Vec<&Completion> = completions.iter().filter(|c| c.state != JobState::Completed).collect();
    if !other.is_empty() {
        match write_part(conn, COMPLETE_OTHER, &other, true, now).await {
            Ok(ids) => applied.extend(ids),
            Err(e) if is_unique_violation(&e) => {
                applied.extend(write_without_conflicts(conn, COMPLETE_OTHER, &other, true, now).await?);
            }
            Err(e) => return Err(e),
        }
    }
    let deleted: Vec<&Completion> =
        completions.iter().filter(|c| c.state == JobState::Completed && c.delete).collect();
    if !deleted.is_empty() {
        let n = CachedQuery::new(DELETE_COMPLETED)
            .bind::<Text, _>(batch_json(deleted.iter().copied(), false))
            .execute(conn)
            .await?;
        if n == deleted.len() {
            applied.extend(deleted.iter().map(|c| c.id));
        } else {
            // The rows still there were fenced out, or are dependencies, kept: written as
            // kept successes (fenced again). The others went (by this statement, or by an
            // earlier attempt of it whose reply was lost).
            let ids: Vec<i64> = deleted.iter().map(|c| c.id).collect();
            let left: Vec<Id> = CachedQuery::new(concat!("SELECT j.id FROM ", by_ids!()))
                .bind::<Text, _>(ids_json(&ids))
                .load(conn)
                .await?;
            let left: std::collections::HashSet<i64> = left.into_iter().map(|r| r.id).collect();
            applied.extend(ids.into_iter().filter(|id| !left.contains(id)));
            let kept: Vec<&Completion> = deleted.into_iter().filter(|c| left.contains(&c.id)).collect();
            if !kept.is_empty() {
                applied.extend(write_successes(conn, &kept, now).await?);
            }
        }
    }
    Ok(applied)
}
