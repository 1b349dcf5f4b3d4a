//! The completion after a batch broke the unique index: the outcomes that would take a
//! uniqueness key another job holds are discarded instead (successes give it up).

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncConnectionCore, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{Completion, DriverError, JobState, Result};

use super::write::{batch_json, write_part};
use crate::cached::CachedQuery;

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
pub(super) async fn write_without_conflicts(
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

pub(super) fn is_unique_violation(e: &jobs_driver::DriverError) -> bool {
    matches!(
        e,
        jobs_driver::DriverError::Database(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _
        ))
    )
}
