//! Actions on jobs, one or many at once: cancel, retry, delete. They run on any async
//! connection, in its transaction if it is in one: the application's (through
//! `connection`), or the driver's own (which wraps each in a transaction). Their
//! notifications are added to `job_notifications` in the same transaction and returned, so
//! that the driver can also deliver them in this process once it commits.
//!
//! The ids travel as one JSON array joined to `jobs` by primary key; the changed rows are
//! stamped with the statement's token, and read back as the rows of those ids that carry it.

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobState, Notification, Result, Retried};

use super::read::{ids_json, state};
use crate::cached::CachedQuery;
use crate::notifications;
use crate::rows::token;

// A cancel marks every unfinished job; those not running are then cancelled at once, and
// the nodes running the others are told `{"cancel": id}`. A running row keeps its token:
// it is the claim's, which may not have read its rows back yet (see `claim`).
const MARK_CANCEL: &str = concat!(
    "UPDATE ",
    by_ids!(),
    " SET j.cancel_requested_at = UTC_TIMESTAMP(6), j.lock_token = IF(j.state = 'running', j.lock_token, $2)
 WHERE j.state IN ('pending', 'available', 'scheduled', 'running', 'retryable')"
);

const CANCEL_WAITING: &str = concat!(
    "UPDATE ",
    by_ids!(),
    " SET j.finalized_at = UTC_TIMESTAMP(6), j.state = 'cancelled'
 WHERE j.lock_token = $2 AND j.state <> 'running'"
);

/// A job a retry would make available that has a uniqueness key unique when available,
/// with whether another job holds the key now.
#[derive(QueryableByName)]
struct Keyed {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = diesel::sql_types::Varbinary)]
    unique_key: Vec<u8>,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    held: bool,
}

const PICK_KEYED: &str = concat!(
    "SELECT j.id, j.unique_key,
       EXISTS (SELECT 1 FROM jobs o WHERE o.unique_held = j.unique_key AND o.id <> j.id) AS held
FROM ",
    by_ids!(),
    " WHERE j.state NOT IN ('running', 'pending') AND j.unique_key IS NOT NULL AND FIND_IN_SET('available', j.unique_states) > 0
ORDER BY j.id"
);

/// Of `keyed` (by id), those whose key another job holds or an earlier one takes.
fn blocked(keyed: Vec<Keyed>) -> Vec<i64> {
    let mut taken = std::collections::HashSet::new();
    let mut blocked = Vec::new();
    for job in keyed {
        if job.held || !taken.insert(job.unique_key) {
            blocked.push(job.id);
        }
    }
    blocked
}

const RETRY: &str = concat!(
    "UPDATE ",
    by_ids!(),
    " SET j.state = IF(j.waiting_on > 0 OR j.failed_on > 0, 'pending', 'available'), j.scheduled_at = UTC_TIMESTAMP(6), j.finalized_at = NULL,
     j.cancel_requested_at = NULL, j.max_attempts = GREATEST(j.max_attempts, j.attempt + 1), j.lock_token = $2
 WHERE j.state NOT IN ('running', 'pending')"
);

#[derive(QueryableByName)]
struct Changed {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    queue: String,
}

/// The rows of `ids` (the JSON array) that carry `token`, and with `running`, those
/// running (a cancel marks them without stamping them).
async fn stamped<C>(conn: &mut C, ids: &str, token: i64, running: bool) -> Result<Vec<Changed>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    const STAMPED: &str =
        concat!("SELECT j.id, j.state, j.queue FROM ", by_ids!(), " WHERE j.lock_token = $2 ORDER BY j.id");
    const STAMPED_OR_RUNNING: &str = concat!(
        "SELECT j.id, j.state, j.queue FROM ",
        by_ids!(),
        " WHERE j.lock_token = $2 OR (j.state = 'running' AND j.cancel_requested_at IS NOT NULL) ORDER BY j.id"
    );
    Ok(CachedQuery::new(if running { STAMPED_OR_RUNNING } else { STAMPED })
        .bind::<Text, _>(ids)
        .bind::<BigInt, _>(token)
        .load(conn)
        .await?)
}

async fn tell<C>(conn: &mut C, told: &[Notification]) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    for n in told {
        notifications::add(conn, n).await?;
    }
    Ok(())
}

/// Cancels the jobs of `ids` that are not finished: one that is not running at once
/// (`cancelled`); a running one is marked and its node told (`running`). Returns the
/// state each changed job is in, and the notifications added.
pub(crate) async fn cancel_many<C>(conn: &mut C, ids: &[i64]) -> Result<(Vec<JobState>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let (ids, token) = (ids_json(ids), token());
    let marked = CachedQuery::new(MARK_CANCEL)
        .bind::<Text, _>(ids.as_str())
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    if marked == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    CachedQuery::new(CANCEL_WAITING)
        .bind::<Text, _>(ids.as_str())
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    let changed = stamped(conn, &ids, token, true).await?;
    let states = changed.iter().map(|c| state(&c.state)).collect::<Result<Vec<_>>>()?;
    let told: Vec<Notification> = changed
        .iter()
        .zip(&states)
        .filter(|(_, s)| **s == JobState::Running)
        .map(|(c, _)| Notification::CancelJob { id: c.id })
        .collect();
    tell(conn, &told).await?;
    Ok((states, told))
}

/// Makes the jobs of `ids` that are not running available now, granting one more attempt
/// to those that used them all. Returns how many changed, and the wake-ups added.
pub(crate) async fn retry_many<C>(conn: &mut C, ids: &[i64]) -> Result<(Retried, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let keyed: Vec<Keyed> = CachedQuery::new(PICK_KEYED).bind::<Text, _>(ids_json(ids)).load(conn).await?;
    let key_held = blocked(keyed);
    let free: Vec<i64> = ids.iter().copied().filter(|id| !key_held.contains(id)).collect();
    let (ids, token) = (ids_json(&free), token());
    let n =
        CachedQuery::new(RETRY).bind::<Text, _>(ids.as_str()).bind::<BigInt, _>(token).execute(conn).await?;
    if n == 0 {
        return Ok((Retried { retried: 0, key_held }, Vec::new()));
    }
    let changed = stamped(conn, &ids, token, false).await?;
    let queues: std::collections::BTreeSet<&str> = changed.iter().map(|c| c.queue.as_str()).collect();
    let woken: Vec<Notification> =
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect();
    tell(conn, &woken).await?;
    Ok((Retried { retried: n as i64, key_held }, woken))
}

/// Deletes the jobs of `ids` that are not running (cancel them first). Returns how many went.
pub(crate) async fn delete_many<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let n = CachedQuery::new(concat!("DELETE j FROM ", by_ids!(), " WHERE j.state <> 'running'"))
        .bind::<Text, _>(ids_json(ids))
        .execute(conn)
        .await?;
    Ok(n as i64)
}
