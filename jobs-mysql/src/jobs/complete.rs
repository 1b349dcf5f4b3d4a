//! The completion: a batch of outcomes written in at most three statements (successes
//! kept, successes deleted, every other outcome), each joining the batch — one JSON array
//! that `JSON_TABLE` turns into rows — to `jobs` by primary key, and each fenced on the row
//! still being `running` at the claimed attempt.
//!
//! MariaDB returns no rows from a multi-table `UPDATE` or `DELETE`, only how many it
//! changed. When that is the whole batch (nearly always), every outcome applied. When it
//! is fewer, the updates read back which of their rows carry their token, and the delete
//! reads which of its rows are still there (fenced out).

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncConnectionCore, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{Completion, DriverError, JobState, Result};

use super::read::ids_json;
use crate::cached::CachedQuery;
use crate::rows::{Id, token};
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
// job gone reads as cancelled (`jobs_driver::workflow`).
const DELETE_COMPLETED: &str = concat!(
    "DELETE j FROM ",
    batch!(""),
    " WHERE NOT EXISTS (SELECT 1 FROM job_dependencies d FORCE INDEX (PRIMARY) WHERE d.depends_on = j.id)"
);

// The state an outcome writes: a job whose cancellation was requested while it ran ends
// cancelled unless it succeeded; one that would run again while it waits for a
// dependency (a retry of which re-opened its edge while it ran) waits in `pending`,
// released when the dependency finishes (not one a dependency failed meanwhile: see the
// Postgres driver's `REQUESTED_STATE`). (No assignment below reads a column another one
// assigns: MySQL does not promise their order in a multi-table UPDATE.)
macro_rules! new_state {
    () => {
        "IF(c.state IN ('retryable', 'scheduled', 'available'), \
         IF(j.cancel_requested_at IS NOT NULL, 'cancelled', IF(j.waiting_on > 0 AND j.failed_on = 0, 'pending', c.state)), c.state)"
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
    j.errors = IF(c.error IS NULL OR (c.give_back > 0 AND JSON_LENGTH(j.errors) >= ",
    jobs_driver::max_given_back_entries!(),
    "), j.errors, JSON_MERGE_PRESERVE(j.errors, CONCAT('[', c.error, ']'))),
    j.scheduled_at = IF(c.delay_ms IS NULL, j.scheduled_at,
                        COALESCE($2, UTC_TIMESTAMP(6)) + INTERVAL (c.delay_ms * 1000) MICROSECOND),
    j.attempt = j.attempt - (c.give_back = 1),
    j.max_attempts = j.max_attempts + (c.give_back = 2),
    j.lock_token = $3"
);

/// One outcome's row of the batch array.
fn row(c: &Completion, other: bool) -> serde_json::Value {
    let mut row = vec![c.id.into(), c.attempt.into()];
    if other {
        row.extend([
            c.state.as_str().into(),
            c.result.as_deref().into(),
            c.error.as_deref().into(),
            c.delay_ms.into(),
            c.attempt_change().into(),
        ]);
    } else if let Some(result) = &c.result {
        row.push(result.as_str().into());
    }
    serde_json::Value::Array(row)
}

/// The batch array of `completions`, in id order: a statement joined to `jobs` by primary key locks the rows in the array's
/// order, and every other statement that locks several jobs locks them ascending (two
/// orders could deadlock).
fn batch_json<'a>(completions: impl Iterator<Item = &'a Completion>, other: bool) -> String {
    let mut completions: Vec<&Completion> = completions.collect();
    completions.sort_by_key(|c| c.id);
    serde_json::Value::Array(completions.into_iter().map(|c| row(c, other)).collect()).to_string()
}

/// A job of a batch whose outcome may take a uniqueness key, as read after the batch broke
/// the unique index.
#[derive(diesel::QueryableByName)]
struct Keyed {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Varbinary)]
    unique_key: Vec<u8>,
    #[diesel(sql_type = Text)]
    unique_states: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    cancel_requested: bool,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    held: bool,
}

// The batch's running jobs that have a uniqueness key, with whether another job holds it.
const PICK_KEYED: &str = concat!(
    "SELECT j.id, j.unique_key, j.unique_states, j.cancel_requested_at IS NOT NULL AS cancel_requested,
       EXISTS (SELECT 1 FROM jobs o WHERE o.unique_held = j.unique_key AND o.id <> j.id) AS held
FROM ",
    batch!(""),
    " WHERE j.unique_key IS NOT NULL"
);

/// The outcomes of `part` that would take a uniqueness key another job holds — a success
/// whose key is unique once completed, a retry, a snooze or a hand-back of a job whose
/// duplicate was enqueued while it ran (its key not unique while running) — or one an
/// earlier outcome of the batch (by id) takes, each with whether its job must give its key
/// up: a success, or a job whose key is unique once discarded too (the others keep it, so
/// a retry of them later finds it held). Read only after the batch broke the unique index
/// (MySQL cannot read the table an `UPDATE` writes, so the check is not part of the
/// statement).
async fn conflicting<C>(conn: &mut C, part: &[&Completion]) -> Result<std::collections::HashMap<i64, bool>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let keyed: Vec<Keyed> = CachedQuery::new(PICK_KEYED)
        .bind::<Text, _>(batch_json(part.iter().copied(), false))
        .load(conn)
        .await?;
    let keyed: std::collections::HashMap<i64, Keyed> = keyed.into_iter().map(|k| (k.id, k)).collect();
    let mut taken = std::collections::HashSet::new();
    let mut ordered: Vec<&Completion> = part.to_vec();
    ordered.sort_by_key(|c| c.id);
    let mut conflicting = std::collections::HashMap::new();
    for c in ordered {
        let Some(k) = keyed.get(&c.id) else { continue };
        let cancelled = k.cancel_requested
            && matches!(c.state, JobState::Retryable | JobState::Scheduled | JobState::Available);
        let requested = if cancelled { JobState::Cancelled } else { c.state };
        if !k.unique_states.split(',').any(|s| s == requested.as_str()) {
            continue;
        }
        if k.held || !taken.insert(k.unique_key.clone()) {
            let gives_up = c.state == JobState::Completed
                || k.unique_states.split(',').any(|s| s == JobState::Discarded.as_str());
            conflicting.insert(c.id, gives_up);
        }
    }
    Ok(conflicting)
}

/// `c` discarded instead, its entry followed by a `unique_conflict` one: the duplicate
/// holding its key does the work.
fn discarded_for_its_key(c: &Completion) -> Completion {
    let entry = serde_json::json!({
        "attempt": c.attempt,
        "at": chrono::Utc::now(),
        "error_type": "unique_conflict",
        "message": format!("another job holds its uniqueness key: discarded instead of {}", c.state),
    });
    // Two objects: the statement wraps them in one array and appends both.
    let error = match &c.error {
        Some(own) => format!("{own},{entry}"),
        None => entry.to_string(),
    };
    Completion { state: JobState::Discarded, error: Some(error), ..c.clone() }
}

// The jobs of the batch rows `[id, attempt]` give up their uniqueness key (still running
// at that attempt): about to finish in a state their key is unique in while another job
// holds it.
const GIVE_UP_KEYS: &str = concat!("UPDATE ", batch!(""), " SET j.unique_key = NULL");

/// Writes `part` with `sql` after a duplicate-key error, in one transaction: the outcomes
/// that would take a key another job holds are discarded instead (but for successes), and
/// those that must give their key up (see [`conflicting`]) give it up first. (One
/// transaction: a key given up by a write that then failed would be lost to a retry of
/// the batch, which no longer sees it held.)
async fn write_without_conflicts(
    conn: &mut AsyncMysqlConnection,
    sql: &'static str,
    part: &[&Completion],
    other: bool,
    now: Option<chrono::NaiveDateTime>,
) -> Result<Vec<i64>> {
    conn.transaction::<_, DriverError, _>(async |tx| {
        let conflicting = conflicting(tx, part).await?;
        let giving_up: Vec<&Completion> =
            part.iter().copied().filter(|c| conflicting.get(&c.id) == Some(&true)).collect();
        if !giving_up.is_empty() {
            CachedQuery::new(GIVE_UP_KEYS)
                .bind::<Text, _>(batch_json(giving_up.iter().copied(), false))
                .execute(tx)
                .await?;
        }
        let rewritten: Vec<Completion> = part
            .iter()
            .map(|c| {
                if other && conflicting.contains_key(&c.id) { discarded_for_its_key(c) } else { (*c).clone() }
            })
            .collect();
        let rewritten: Vec<&Completion> = rewritten.iter().collect();
        write_part(tx, sql, &rewritten, other, now).await
    })
    .await
}

fn is_unique_violation(e: &jobs_driver::DriverError) -> bool {
    matches!(
        e,
        jobs_driver::DriverError::Database(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _
        ))
    )
}

/// Writes `part` with `sql`; returns the ids that applied.
async fn write_part<C>(
    conn: &mut C,
    sql: &'static str,
    part: &[&Completion],
    other: bool,
    now: Option<chrono::NaiveDateTime>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let token = token();
    let n = CachedQuery::new(sql)
        .bind::<Text, _>(batch_json(part.iter().copied(), other))
        .bind::<Nullable<Datetime>, _>(now)
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    if n == part.len() {
        return Ok(part.iter().map(|c| c.id).collect());
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = part.iter().map(|c| c.id).collect();
    let rows: Vec<Id> = CachedQuery::new(concat!("SELECT j.id FROM ", by_ids!(), " WHERE j.lock_token = $2"))
        .bind::<Text, _>(ids_json(&ids))
        .bind::<BigInt, _>(token)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

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
