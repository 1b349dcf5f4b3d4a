//! The leader's statements: rescue stuck jobs (due jobs are promoted in `due.rs`, finished
//! ones pruned in `prune.rs`); and the node's own: hand back claims whose reply it never
//! received.
//!
//! Each move is one transaction: a `SELECT … FOR UPDATE SKIP LOCKED` picks and locks the
//! rows (with what decides their fate: an overrun timeout, a spent attempt budget, a
//! uniqueness key someone else holds), Rust decides, and one `UPDATE` over a `JSON_TABLE`
//! of `[id, new state, …]` writes them, with a `job_notifications` row per queue that got
//! available jobs. MariaDB has no `UPDATE … RETURNING`, and reading the fate first keeps
//! every rule in one place.

use std::collections::{BTreeSet, HashSet};

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Datetime, Integer, Nullable, Text, Varbinary};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{
    DriverError, JobReleaseOrphansParams, JobRescueStuckParams, JobState, Notification, RescueFate,
    RescueReason, Result, Stuck,
};

use crate::cached::CachedQuery;
use crate::notifications;
use crate::time::{micros, naive_opt};

/// One wake-up per distinct queue of `queues`.
pub(super) fn wake_ups<'a>(queues: impl IntoIterator<Item = &'a str>) -> Vec<Notification> {
    let queues: BTreeSet<&str> = queues.into_iter().collect();
    queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect()
}

/// The operation's time as an error entry's `at` holds it (as the engine writes it).
pub(super) fn at_text(now: Option<DateTime<Utc>>) -> String {
    serde_json::to_value(now.unwrap_or_else(Utc::now))
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A running job picked for rescue, with what decides its fate (see
/// [`jobs_driver::Stuck`]).
#[derive(QueryableByName)]
struct StuckRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Integer)]
    attempt: i32,
    #[diesel(sql_type = Integer)]
    max_attempts: i32,
    #[diesel(sql_type = Bool)]
    timed_out: bool,
    #[diesel(sql_type = Bool)]
    gone: bool,
    #[diesel(sql_type = Bool)]
    cancel_requested: bool,
    #[diesel(sql_type = Bool)]
    held: bool,
    #[diesel(sql_type = BigInt)]
    uncertain_rescues: i64,
    #[diesel(sql_type = Nullable<Text>)]
    node: Option<String>,
    #[diesel(sql_type = Nullable<Varbinary>)]
    available_key: Option<Vec<u8>>,
    #[diesel(sql_type = Bool)]
    key_taken: bool,
    #[diesel(sql_type = Nullable<Varbinary>)]
    unique_key: Option<Vec<u8>>,
    #[diesel(sql_type = Nullable<Text>)]
    unique_states: Option<String>,
}

/// A picked job's uniqueness key and the states it is unique in.
struct StuckKey {
    id: i64,
    key: Option<Vec<u8>>,
    states: Option<String>,
}

impl StuckKey {
    /// The key, if the job holds it in `state`.
    fn held_in(&self, state: JobState) -> Option<&[u8]> {
        let unique_there = self.states.as_deref().is_some_and(|s| s.split(',').any(|s| s == state.as_str()));
        self.key.as_deref().filter(|_| unique_there)
    }
}

impl StuckRow {
    fn stuck(self, lost: RescueReason) -> Stuck {
        Stuck {
            id: self.id,
            queue: self.queue,
            reason: lost.judged(self.timed_out, self.gone),
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            cancel_requested: self.cancel_requested,
            key_held_by_another: self.held,
            uncertain_rescues: i32::try_from(self.uncertain_rescues).unwrap_or(i32::MAX),
            available_key: self.available_key,
            node: self.node,
        }
    }
}

/// The columns of a [`StuckRow`], with `$1` the time and `$2` the timeout grace in
/// microseconds (a macro, for `concat!`). The node losses are counted, not tested with
/// `EXISTS`: MySQL runs an `EXISTS` over a `JSON_TABLE` as a semi-join that reads the
/// table function once.
macro_rules! stuck_columns {
    () => {
        concat!(
            "j.id, j.queue, j.attempt, j.max_attempts,
       (j.timeout_ms IS NOT NULL
        AND j.attempted_at + INTERVAL ((j.timeout_ms * 1000) + $2) MICROSECOND < COALESCE($1, UTC_TIMESTAMP(6))) AS timed_out,
       (j.cancel_requested_at IS NOT NULL) AS cancel_requested, ",
            key_held_by_another!(),
            " AS held,
       (SELECT COUNT(*) FROM JSON_TABLE(j.errors, '$[*]' COLUMNS (t VARCHAR(64) PATH '$.error_type',
                                                               u VARCHAR(8) PATH '$.uncertain')) AS e
        WHERE e.t = 'rescued_node_lost' OR (e.t = 'rescued_timeout' AND e.u = 'true')) AS uncertain_rescues,
       j.attempted_node AS node,
       IF(FIND_IN_SET('available', j.unique_states) > 0, j.unique_key, NULL) AS available_key,
       (j.unique_key IS NOT NULL AND EXISTS (SELECT 1 FROM jobs o WHERE o.unique_held = j.unique_key AND o.id <> j.id)) AS key_taken,
       j.unique_key, j.unique_states"
        )
    };
}

// $1 now, $2 timeout grace (µs), $3 node staleness (µs), $4 whether to rescue the jobs of
// silent nodes (and of nodes with no row, or a process started after the claim), $5 limit, $6 the lock-lost grace (µs), $7
// whether to rescue the jobs of nodes whose lock is lost; `gone` (written twice) says the
// job's node is gone. A job whose node is gone is a node's loss, even once past its
// timeout: its run may never have started.
const PICK_STUCK: &str = concat!(
    "SELECT ",
    stuck_columns!(),
    ", ",
    "(($4 AND NOT EXISTS (SELECT 1 FROM job_nodes n
                           WHERE n.name = j.attempted_node
                             AND n.heartbeat_at > COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $3 MICROSECOND
                             AND n.started_at <= j.attempted_at))
    OR ($7 AND EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = j.attempted_node AND ",
    crate::liveness::lock_lost!("n", "COALESCE($1, UTC_TIMESTAMP(6))", "$6"),
    ")))",
    " AS gone
FROM jobs j
WHERE j.state = 'running'
  AND ((j.timeout_ms IS NOT NULL
        AND j.attempted_at + INTERVAL ((j.timeout_ms * 1000) + $2) MICROSECOND < COALESCE($1, UTC_TIMESTAMP(6)))
    OR ",
    "(($4 AND NOT EXISTS (SELECT 1 FROM job_nodes n
                           WHERE n.name = j.attempted_node
                             AND n.heartbeat_at > COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $3 MICROSECOND
                             AND n.started_at <= j.attempted_at))
    OR ($7 AND EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = j.attempted_node AND ",
    crate::liveness::lock_lost!("n", "COALESCE($1, UTC_TIMESTAMP(6))", "$6"),
    ")))",
    ")
LIMIT $5
FOR UPDATE SKIP LOCKED"
);

// $1 now, $2 unused (0), $3 the node, $4 grace (µs), $5 the [job, attempt] runs it holds.
const PICK_ORPHANS: &str = concat!(
    "SELECT ",
    stuck_columns!(),
    ", false AS gone
FROM jobs j
WHERE j.state = 'running' AND j.attempted_node = $3
  AND j.state_at < COALESCE($1, UTC_TIMESTAMP(6)) - INTERVAL $4 MICROSECOND
  AND (j.id, j.attempt) NOT IN (SELECT t.id, t.attempt FROM JSON_TABLE($5, '$[*]'
           COLUMNS (id BIGINT PATH '$[0]', attempt INT PATH '$[1]')) AS t)
LIMIT 1000
FOR UPDATE SKIP LOCKED"
);

// `$1` is `[[id, state, max_attempts, entry, key_taken], …]`; the entries are JSON objects
// as text, the fates going back first. A job that ends in one of its unique states while
// another job holds its key, or takes it by this rescue, gives the key up (`key_taken`,
// worked out by [`rescue`] from the pick: MySQL cannot read the table it updates).
const RESCUE: &str = concat!(
    "\
UPDATE JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$[0]', state VARCHAR(16) PATH '$[1]',
                                      max_attempts INT PATH '$[2]', entry TEXT PATH '$[3]',
                                      key_taken INT PATH '$[4]')) AS c
STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = c.id
SET j.unique_key = IF(c.state <> 'available' AND c.key_taken = 1 AND FIND_IN_SET(c.state, j.unique_states) > 0,
                      NULL, j.unique_key),
    -- A workflow step going back never runs past a dependency that failed it while it
    -- ran (retried, then failed): held in `pending` where its workflow holds, cancelled
    -- naming it where it cancels (as the completion's `new_state!`); one whose
    -- dependency was retried while it ran waits for it again.
    j.state = IF(c.state <> 'available', c.state, IF(j.failed_on > 0, IF(",
    holds_on_failure!(),
    ", 'pending', 'cancelled'), IF(j.waiting_on > 0, 'pending', c.state))),
    j.max_attempts = c.max_attempts,
    j.finalized_at = IF(c.state = 'available' AND (j.failed_on = 0 OR ",
    holds_on_failure!(),
    "), NULL, COALESCE($2, UTC_TIMESTAMP(6))),
    -- Appended as MariaDB and MySQL both can (MariaDB has no CAST … AS JSON).
    j.errors = JSON_MERGE_PRESERVE(j.errors, CONCAT('[', c.entry, ']'),
                                   IF(c.state = 'available' AND j.failed_on > 0 AND NOT ",
    holds_on_failure!(),
    ", ",
    failed_dependency_entry!("COALESCE($2, UTC_TIMESTAMP(6))"),
    ", JSON_ARRAY()))
WHERE j.state = 'running'"
);

/// Gives each of `stuck` its fate ([`RescueFate::decide_all`]) in one statement. Returns the
/// ids and the wake-ups added.
async fn rescue(
    tx: &mut AsyncMysqlConnection,
    mut picked: Vec<StuckRow>,
    reason: RescueReason,
    rescuer: &str,
    max_node_losses: i32,
    now: Option<DateTime<Utc>>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    if picked.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    // The jobs ending in a unique state whose key another job holds, or takes by this
    // rescue: one going back, or one ending earlier (in id order) in one of its unique
    // states. At most one job of a key keeps it.
    let mut taken: HashSet<i64> = picked.iter().filter(|r| r.key_taken).map(|r| r.id).collect();
    let keys: Vec<StuckKey> = picked
        .iter_mut()
        .map(|r| StuckKey { id: r.id, key: r.unique_key.take(), states: r.unique_states.take() })
        .collect();
    let stuck: Vec<Stuck> = picked.into_iter().map(|r| r.stuck(reason)).collect();
    let at = now.unwrap_or_else(Utc::now);
    let mut fates = RescueFate::decide_all(&stuck, rescuer, max_node_losses, at);
    fates.sort_by_key(|f| (f.state != JobState::Available, f.id));
    let mut kept: HashSet<&[u8]> = HashSet::new();
    for fate in &fates {
        let key = keys.iter().find(|k| k.id == fate.id).and_then(|k| k.held_in(fate.state));
        if let Some(key) = key.filter(|_| !taken.contains(&fate.id))
            && !kept.insert(key)
            && fate.state != JobState::Available
        {
            taken.insert(fate.id);
        }
    }
    let mut rows = Vec::with_capacity(stuck.len());
    let mut available = Vec::new();
    for fate in fates {
        if let (JobState::Available, Some(job)) = (fate.state, stuck.iter().find(|j| j.id == fate.id)) {
            available.push(job.queue.as_str());
        }
        let key_taken = taken.contains(&fate.id);
        rows.push(serde_json::json!([
            fate.id,
            fate.state.as_str(),
            fate.max_attempts,
            fate.entry.to_string(),
            i32::from(key_taken)
        ]));
    }
    CachedQuery::new(RESCUE)
        .bind::<Text, _>(serde_json::Value::Array(rows).to_string())
        .bind::<Nullable<Datetime>, _>(naive_opt(now))
        .execute(tx)
        .await?;
    let woken = wake_ups(available);
    for wake_up in &woken {
        notifications::add(tx, wake_up).await?;
    }
    Ok((stuck.iter().map(|j| j.id).collect(), woken))
}

/// See [`JobRescueStuckParams`]. Returns the rescued ids and the wake-ups added.
pub(crate) async fn rescue_stuck(
    conn: &mut AsyncMysqlConnection,
    params: JobRescueStuckParams<'_>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let now = naive_opt(params.now);
    conn.transaction::<_, DriverError, _>(async |tx| {
        let picked: Vec<StuckRow> = CachedQuery::new(PICK_STUCK)
            .bind::<Nullable<Datetime>, _>(now)
            .bind::<BigInt, _>(micros(params.timeout_grace))
            .bind::<BigInt, _>(micros(params.node_stale_after))
            .bind::<Bool, _>(params.lost_nodes)
            .bind::<BigInt, _>(params.limit)
            .bind::<BigInt, _>(micros(params.lock_lost_grace))
            .bind::<Bool, _>(params.lost_nodes_by_lock)
            .load(tx)
            .await?;
        rescue(tx, picked, RescueReason::NodeLost, params.rescuer, params.max_node_losses, params.now).await
    })
    .await
}

/// See [`JobReleaseOrphansParams`]. Returns the released ids and the wake-ups added.
pub(crate) async fn release_orphans(
    conn: &mut AsyncMysqlConnection,
    params: JobReleaseOrphansParams<'_>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let now = naive_opt(params.now);
    let held: Vec<[i64; 2]> = params.held.iter().map(|&(id, attempt)| [id, i64::from(attempt)]).collect();
    let held = serde_json::to_string(&held).unwrap_or_else(|_| "[]".into());
    conn.transaction::<_, DriverError, _>(async |tx| {
        let picked: Vec<StuckRow> = CachedQuery::new(PICK_ORPHANS)
            .bind::<Nullable<Datetime>, _>(now)
            .bind::<BigInt, _>(0)
            .bind::<Text, _>(params.node)
            .bind::<BigInt, _>(micros(params.grace))
            .bind::<Text, _>(&held)
            .load(tx)
            .await?;
        // An orphan never ran: it is never discarded for its node losses.
        rescue(tx, picked, RescueReason::Orphaned, params.node, i32::MAX, params.now).await
    })
    .await
}
