//! Actions on jobs, one or many in one statement: cancel, retry, delete. They run on any
//! async connection, in its transaction if it is in one: the application's (through
//! `connection`), or the driver's own. Their notifications are added to
//! `job_notifications` in the same transaction and returned, so that the driver can also
//! deliver them in this process once it commits.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::Sqlite;
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobState, Notification, Result, Retried};

use super::read::ids_json;
use crate::cached::CachedQuery;
use crate::notifications;

#[derive(QueryableByName)]
struct Changed {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    queue: String,
}

// A running job is only marked; its node hears `{"cancel": id}`.
const CANCEL: &str = "\
UPDATE jobs
SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
    finalized_at = CASE WHEN state = 'running' THEN NULL ELSE $2 END,
    cancel_requested_at = $2
WHERE id IN (SELECT value FROM json_each($1)) AND state IN ('pending', 'available', 'scheduled', 'running', 'retryable')
RETURNING id, state, queue";

const RETRY: &str = "\
UPDATE jobs
SET state = CASE WHEN waiting_on > 0 OR failed_on > 0 THEN 'pending' ELSE 'available' END, scheduled_at = $2, finalized_at = NULL, cancel_requested_at = NULL,
    max_attempts = max(max_attempts, attempt + 1)
WHERE id IN (SELECT value FROM json_each($1)) AND state NOT IN ('running', 'pending')
RETURNING id, state, queue";

async fn change<C>(conn: &mut C, sql: &'static str, ids: &[i64], now_ms: i64) -> Result<Vec<Changed>>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    Ok(CachedQuery::new(sql).bind::<Text, _>(ids_json(ids)).bind::<BigInt, _>(now_ms).load(conn).await?)
}

async fn tell<C>(conn: &mut C, notifications: &[Notification]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    for n in notifications {
        notifications::add_async(conn, n).await?;
    }
    Ok(())
}

/// Cancels the jobs of `ids` that are not finished: one that is not running at once
/// (`cancelled`); a running one is marked and its node told (`running`). Returns the
/// state each changed job is in, and the notifications added.
pub(crate) async fn cancel_many<C>(
    conn: &mut C,
    ids: &[i64],
    now_ms: i64,
) -> Result<(Vec<JobState>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let changed = change(conn, CANCEL, ids, now_ms).await?;
    let states = changed
        .iter()
        .map(|c| c.state.parse::<JobState>().map_err(|e| jobs_driver::DriverError::unexpected(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    let told: Vec<Notification> = changed
        .iter()
        .zip(&states)
        .filter(|(_, state)| **state == JobState::Running)
        .map(|(c, _)| Notification::CancelJob { id: c.id })
        .collect();
    tell(conn, &told).await?;
    Ok((states, told))
}

// Of the jobs of $1 a retry would make available (neither running nor pending), those whose
// key another job holds, or an earlier job (by id) of the same call takes (both unique when
// available).
const BLOCKED: &str = concat!(
    "SELECT j.id FROM jobs j
WHERE j.id IN (SELECT value FROM json_each($1)) AND j.state NOT IN ('running', 'pending') AND (",
    key_held_by_another!("j"),
    " OR (j.unique_key IS NOT NULL AND instr(j.unique_states, '\"available\"') > 0
         AND EXISTS (SELECT 1 FROM jobs d WHERE d.id IN (SELECT value FROM json_each($1)) AND d.state NOT IN ('running', 'pending')
                     AND d.id < j.id AND d.unique_key = j.unique_key
                     AND instr(d.unique_states, '\"available\"') > 0)))
ORDER BY j.id"
);

#[derive(QueryableByName)]
struct Blocked {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

/// Makes the jobs of `ids` that are not running available now, granting one more attempt
/// to those that used them all; one whose uniqueness key is held stays as it is (see
/// [`Retried`]). Returns what changed, and the wake-ups added. (Run in a transaction: the
/// check and the change see the same rows.)
pub(crate) async fn retry_many<C>(
    conn: &mut C,
    ids: &[i64],
    now_ms: i64,
) -> Result<(Retried, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let blocked: Vec<Blocked> = CachedQuery::new(BLOCKED).bind::<Text, _>(ids_json(ids)).load(conn).await?;
    let key_held: Vec<i64> = blocked.into_iter().map(|b| b.id).collect();
    let free: Vec<i64> = ids.iter().copied().filter(|id| !key_held.contains(id)).collect();
    let changed = change(conn, RETRY, &free, now_ms).await?;
    let woken = crate::notifications::per_queue(changed.iter().map(|c| c.queue.as_str()).collect());
    tell(conn, &woken).await?;
    Ok((Retried { retried: changed.len() as i64, key_held }, woken))
}

/// Deletes the jobs of `ids` that are not running (cancel them first). Returns how many went.
pub(crate) async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let n = CachedQuery::new(
        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each($1)) AND state <> 'running'",
    )
    .bind::<Text, _>(ids_json(ids))
    .execute(conn)
    .await?;
    Ok(n as i64)
}
