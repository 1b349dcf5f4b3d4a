//! The scheduler's move: scheduled and retryable jobs that are due become available, in
//! one transaction (pick and lock, decide in Rust, write), as the other moves of
//! `maintenance.rs`.

use std::collections::HashMap;

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Datetime, Nullable, SmallInt, Text, Varbinary};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{DriverError, JobScheduleDueParams, Notification, Result};

use super::maintenance::{at_text, wake_ups};
use super::read::ids_json;
use crate::cached::CachedQuery;
use crate::notifications;
use crate::time::naive_opt;

#[derive(QueryableByName)]
struct Due {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Nullable<Varbinary>)]
    unique_key: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Text>)]
    unique_states: Option<String>,
    #[diesel(sql_type = SmallInt)]
    priority: i16,
    #[diesel(sql_type = Datetime)]
    scheduled_at: chrono::NaiveDateTime,
    #[diesel(sql_type = Bool)]
    held: bool,
}

const PICK_DUE: &str = concat!(
    "SELECT j.id, j.queue, j.unique_key, j.unique_states, j.priority, j.scheduled_at, ",
    key_held_by_another!(),
    " AS held
FROM jobs j
WHERE j.state IN ('scheduled', 'retryable') AND j.state_at <= COALESCE($1, UTC_TIMESTAMP(6))
ORDER BY j.state_at
LIMIT $2
FOR UPDATE SKIP LOCKED"
);

const MAKE_AVAILABLE: &str = concat!("UPDATE ", by_ids!(), " SET j.state = 'available'");

const DISCARD_DUPLICATES: &str = concat!(
    "UPDATE ",
    by_ids!(),
    "
SET j.state = 'discarded', j.finalized_at = COALESCE($2, UTC_TIMESTAMP(6)),
    j.errors = JSON_ARRAY_APPEND(j.errors, '$', JSON_OBJECT(
        'attempt', j.attempt, 'at', $3, 'error_type', 'unique_conflict',
        'message', 'another job holds its uniqueness key')),
    -- Given up if discarded is one of its unique states: another job takes the key.
    j.unique_key = IF(FIND_IN_SET('discarded', j.unique_states) > 0, NULL, j.unique_key)"
);

/// See [`JobScheduleDueParams`]: due jobs become available. One whose uniqueness key
/// another job holds (a duplicate enqueued while it waited in a state outside its unique
/// states), or that a job due with it takes first (by priority, then due time, then id),
/// is discarded instead, with an error entry: the batch never fails on the unique index.
/// Returns how many became available and the wake-ups added.
pub(crate) async fn schedule_due(
    conn: &mut AsyncMysqlConnection,
    params: JobScheduleDueParams,
) -> Result<(i64, Vec<Notification>)> {
    let now = naive_opt(params.now);
    let at = at_text(params.now);
    conn.transaction::<_, DriverError, _>(async |tx| {
        {
            let due: Vec<Due> = CachedQuery::new(PICK_DUE)
                .bind::<Nullable<Datetime>, _>(now)
                .bind::<BigInt, _>(params.limit)
                .load(tx)
                .await?;
            if due.is_empty() {
                return Ok((0, Vec::new()));
            }
            // The first of each key (priority, due time, id) may go; the rest are duplicates.
            let mut order: Vec<&Due> = due.iter().collect();
            order.sort_by_key(|j| (j.priority, j.scheduled_at, j.id));
            let mut taken: HashMap<&[u8], i64> = HashMap::new();
            let (mut available, mut duplicates) = (Vec::new(), Vec::new());
            for job in order {
                let unique_when_available = job.unique_key.is_some()
                    && job.unique_states.as_deref().is_some_and(|s| s.split(',').any(|s| s == "available"));
                let duplicate = unique_when_available
                    && (job.held
                        || job.unique_key.as_deref().is_some_and(|key| taken.insert(key, job.id).is_some()));
                if duplicate { duplicates.push(job) } else { available.push(job) }
            }
            if !available.is_empty() {
                let ids: Vec<i64> = available.iter().map(|j| j.id).collect();
                CachedQuery::new(MAKE_AVAILABLE).bind::<Text, _>(ids_json(&ids)).execute(tx).await?;
            }
            if !duplicates.is_empty() {
                let ids: Vec<i64> = duplicates.iter().map(|j| j.id).collect();
                CachedQuery::new(DISCARD_DUPLICATES)
                    .bind::<Text, _>(ids_json(&ids))
                    .bind::<Nullable<Datetime>, _>(now)
                    .bind::<Text, _>(&at)
                    .execute(tx)
                    .await?;
            }
            let woken = wake_ups(available.iter().map(|j| j.queue.as_str()));
            for wake_up in &woken {
                notifications::add(tx, wake_up).await?;
            }
            Ok((available.len() as i64, woken))
        }
    })
    .await
}
