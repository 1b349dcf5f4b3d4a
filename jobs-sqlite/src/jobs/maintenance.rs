//! The leader's statements: rescue stuck jobs (due ones are made available in `due.rs`,
//! finished ones pruned in `prune.rs`); and the node's own: hand back claims whose reply
//! it never received.

use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{
    JobReleaseOrphansParams, JobRescueStuckParams, JobState, Notification, RescueFate, RescueReason, Result,
    Stuck,
};

use crate::cached::CachedQuery;
use crate::liveness::Liveness;
use crate::time::{millis, now_ms};

/// The columns of a [`StuckRow`] for job `jobs` (a macro, for `concat!`).
macro_rules! stuck_columns {
    () => {
        concat!(
            "jobs.id, jobs.queue, jobs.attempt, jobs.max_attempts,
       jobs.cancel_requested_at IS NOT NULL AS cancel_requested, ",
            key_held_by_another!("jobs"),
            " AS held,
       (SELECT count(*) FROM json_each(jobs.errors) e
        WHERE e.value ->> '$.error_type' = 'rescued_node_lost'
           OR (e.value ->> '$.error_type' = 'rescued_timeout' AND e.value -> '$.uncertain' = 'true')) AS uncertain_rescues,
       jobs.attempted_by ->> '$[#-1]' AS node,
       CASE WHEN instr(jobs.unique_states, '\"available\"') > 0 THEN jobs.unique_key END AS available_key"
        )
    };
}

// $1 now (ms), $2 timeout grace (ms), $3 limit, $4 whether to rescue the jobs of nodes
// with no row, $5 the nodes gone (a JSON array, see `Liveness`). A job whose node is gone
// is a node's loss, even once past its timeout: its run may never have started.
const PICK_STUCK: &str = concat!(
    "SELECT ",
    stuck_columns!(),
    ", timed_out, gone
FROM (SELECT jobs.*,
             (timeout_ms IS NOT NULL AND attempted_at + timeout_ms + $2 < $1) AS timed_out,
             (($4 AND NOT EXISTS (SELECT 1 FROM job_nodes n WHERE n.name = attempted_by ->> '$[#-1]'
                                                                AND n.started_at <= attempted_at))
              OR coalesce(attempted_by ->> '$[#-1]', '') IN (SELECT value FROM json_each($5))) AS gone
      FROM jobs WHERE state = 'running') AS jobs
WHERE jobs.timed_out OR jobs.gone
LIMIT $3"
);

// $1 now (ms), $2 the node, $3 grace (ms), $4 the [job, attempt] runs it holds.
const PICK_ORPHANS: &str = concat!(
    "SELECT ",
    stuck_columns!(),
    ", false AS timed_out, false AS gone
FROM jobs
WHERE jobs.state = 'running'
  AND jobs.attempted_by ->> '$[#-1]' = $2
  AND jobs.attempted_at < $1 - $3
  AND NOT EXISTS (SELECT 1 FROM json_each($4) h
                  WHERE h.value ->> '$[0]' = jobs.id AND h.value ->> '$[1]' = jobs.attempt)
LIMIT 1000"
);

/// A picked job with what decides its fate (see [`jobs_driver::Stuck`]).
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
    cancel_requested: bool,
    #[diesel(sql_type = Bool)]
    held: bool,
    #[diesel(sql_type = Integer)]
    uncertain_rescues: i32,
    #[diesel(sql_type = Nullable<Text>)]
    node: Option<String>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Binary>)]
    available_key: Option<Vec<u8>>,
    #[diesel(sql_type = Bool)]
    timed_out: bool,
    #[diesel(sql_type = Bool)]
    gone: bool,
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
            uncertain_rescues: self.uncertain_rescues,
            available_key: self.available_key,
            node: self.node,
        }
    }
}

// One job's fate: $1 id, $2 state, $3 attempts allowed, $4 error entry, $5 now (ms), $6
// now (JSON).
const WRITE_FATE: &str = concat!(
    "\
UPDATE jobs
-- A workflow step going back never runs past a dependency that failed it while it ran
-- (retried, then failed): held in `pending` where its workflow holds, cancelled naming it
-- where it cancels (as `complete.rs`'s `requested_state!`); one whose dependency was
-- retried while it ran waits for it again.
SET state = CASE WHEN $2 <> 'available' THEN $2 WHEN failed_on > 0 AND ",
    holds_on_failure!(),
    " THEN 'pending' WHEN failed_on > 0 THEN 'cancelled' WHEN waiting_on > 0 THEN 'pending' ELSE $2 END,
    max_attempts = $3,
    finalized_at = CASE WHEN $2 <> 'available' OR failed_on > 0 AND NOT ",
    holds_on_failure!(),
    " THEN $5 END,
    errors = CASE WHEN $2 = 'available' AND failed_on > 0 AND NOT ",
    holds_on_failure!(),
    " THEN ",
    with_failed_dependency_entry!("json_insert(errors, '$[#]', json($4))", "$6"),
    " ELSE json_insert(errors, '$[#]', json($4)) END,
    -- A job that ends in one of its unique states while another job holds its key gives
    -- the key up (the unique index never fails the rescue). The fates going back are
    -- written first, so a job ending here sees a key taken back by this rescue, and at
    -- most one job of a key ending here keeps it.
    unique_key = CASE WHEN $2 <> 'available' AND instr(unique_states, '\"' || $2 || '\"') > 0
                           AND EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = jobs.unique_key
                                       AND instr(o.unique_states, '\"' || o.state || '\"') > 0 AND o.id <> jobs.id)
                      THEN NULL ELSE unique_key END
WHERE id = $1 AND state = 'running'"
);

/// Gives each of `stuck` its fate ([`RescueFate::decide_all`]); returns the ids and the
/// wake-ups added.
fn write_fates(
    conn: &mut SqliteConnection,
    stuck: Vec<Stuck>,
    rescuer: &str,
    max_node_losses: i32,
    now_ms: i64,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let at = crate::time::from_ms(now_ms);
    let at_json = crate::time::at_json(now_ms);
    let mut ids = Vec::with_capacity(stuck.len());
    let mut available = Vec::new();
    let mut fates = RescueFate::decide_all(&stuck, rescuer, max_node_losses, at);
    // Going back first (see WRITE_FATE), then by id.
    fates.sort_by_key(|f| (f.state != JobState::Available, f.id));
    for fate in fates {
        let Some(job) = stuck.iter().find(|j| j.id == fate.id) else { continue };
        let written = CachedQuery::new(WRITE_FATE)
            .bind::<BigInt, _>(fate.id)
            .bind::<Text, _>(fate.state.as_str())
            .bind::<Integer, _>(fate.max_attempts)
            .bind::<Text, _>(fate.entry.to_string())
            .bind::<BigInt, _>(now_ms)
            .bind::<Text, _>(at_json.as_str())
            .execute(conn)?;
        if written == 1 {
            ids.push(fate.id);
            if fate.state == JobState::Available {
                available.push(job.queue.as_str());
            }
        }
    }
    let wake_ups = crate::notifications::per_queue(available);
    for wake_up in &wake_ups {
        crate::notifications::add(conn, wake_up)?;
    }
    Ok((ids, wake_ups))
}

/// See [`JobRescueStuckParams`]. Returns the rescued ids and the wake-ups added.
pub(crate) fn rescue_stuck(
    conn: &mut SqliteConnection,
    params: &JobRescueStuckParams<'_>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let now = now_ms(params.now);
    let silence = (millis(params.node_stale_after), params.lost_nodes);
    let lock = (millis(params.lock_lost_grace), params.lost_nodes_by_lock);
    let gone = Liveness::read(conn, now, silence, lock)?.gone_json();
    let picked: Vec<StuckRow> = CachedQuery::new(PICK_STUCK)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(millis(params.timeout_grace))
        .bind::<BigInt, _>(params.limit)
        .bind::<Bool, _>(params.lost_nodes)
        .bind::<Text, _>(gone)
        .load(conn)?;
    let stuck = picked.into_iter().map(|r| r.stuck(RescueReason::NodeLost)).collect();
    write_fates(conn, stuck, params.rescuer, params.max_node_losses, now)
}

/// See [`JobReleaseOrphansParams`]. Returns the released ids and the wake-ups added.
pub(crate) fn release_orphans(
    conn: &mut SqliteConnection,
    params: &JobReleaseOrphansParams<'_>,
) -> Result<(Vec<i64>, Vec<Notification>)> {
    let now = now_ms(params.now);
    let held = serde_json::to_string(params.held).unwrap_or_else(|_| "[]".into());
    let picked: Vec<StuckRow> = CachedQuery::new(PICK_ORPHANS)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(params.node)
        .bind::<BigInt, _>(millis(params.grace))
        .bind::<Text, _>(held)
        .load(conn)?;
    let stuck = picked.into_iter().map(|r| r.stuck(RescueReason::Orphaned)).collect();
    // An orphan never ran: it is never discarded for its node losses.
    write_fates(conn, stuck, params.node, i32::MAX, now)
}
