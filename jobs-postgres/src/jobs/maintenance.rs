//! The leader's queries: rescue stuck jobs (due jobs are promoted in `due.rs`, finished
//! ones pruned in `prune.rs`); and the node's own: hand back claims whose reply it never
//! received.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bool, Int4, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncConnectionCore, AsyncPgConnection, RunQueryDsl};
use jobs_driver::{
    DriverError, JobReleaseOrphansParams, JobRescueStuckParams, RescueFate, RescueReason, Result, Stuck,
};

use crate::notifications::available_channel;
use crate::rows::{Id, millis};

/// The columns of a [`Stuck`] row for the picked job `jobs` (a macro, for `concat!`).
macro_rules! stuck_columns {
    () => {
        concat!(
            "jobs.id, jobs.queue, jobs.attempt, jobs.max_attempts,
       jobs.cancel_requested_at IS NOT NULL AS cancel_requested, ",
            key_held_by_another!("jobs"),
            " AS held,
       (SELECT count(*) FROM jsonb_array_elements(jobs.errors) e
        WHERE e->>'error_type' = 'rescued_node_lost'
           OR (e->>'error_type' = 'rescued_timeout' AND e->>'uncertain' = 'true'))::int4 AS uncertain_rescues,
       jobs.attempted_by[cardinality(jobs.attempted_by)] AS node,
       CASE WHEN 'available' = ANY (jobs.unique_states) THEN jobs.unique_key END AS available_key"
        )
    };
}

/// Whether running job `jobs` ran `$3` ms past its timeout (a macro, for `concat!`).
macro_rules! overran {
    () => {
        "(jobs.timeout_ms IS NOT NULL
        AND jobs.attempted_at + (jobs.timeout_ms + $3) * interval '1 millisecond' < clock.now)"
    };
}

// $1 now, $2 node staleness (ms), $3 timeout grace (ms), $4 limit, $5 whether to rescue the
// jobs of silent nodes (and of nodes with no row, or a process started after the claim), $6 the lock-lost grace (ms), $7 whether
// to rescue the jobs of nodes whose lock is lost; `gone` (written twice) says the job's
// node is gone. A job whose node is gone is a node's loss, even once past its timeout:
// its run may never have started.
const PICK_STUCK: &str = concat!(
    "WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now)
SELECT ",
    stuck_columns!(),
    ", ",
    overran!(),
    " AS timed_out, ",
    "(($5 AND NOT EXISTS (SELECT 1 FROM job_nodes n
                           WHERE n.name = jobs.attempted_by[cardinality(jobs.attempted_by)]
                             AND n.heartbeat_at > clock.now - $2 * interval '1 millisecond'
                             AND n.started_at <= jobs.attempted_at))
    OR ($7 AND EXISTS (SELECT 1 FROM job_nodes n
                       WHERE n.name = jobs.attempted_by[cardinality(jobs.attempted_by)] AND ",
    crate::liveness::lock_lost!("n", "clock.now", "$6"),
    ")))",
    " AS gone
FROM jobs, clock
WHERE jobs.state = 'running' AND (",
    overran!(),
    " OR ",
    "(($5 AND NOT EXISTS (SELECT 1 FROM job_nodes n
                           WHERE n.name = jobs.attempted_by[cardinality(jobs.attempted_by)]
                             AND n.heartbeat_at > clock.now - $2 * interval '1 millisecond'
                             AND n.started_at <= jobs.attempted_at))
    OR ($7 AND EXISTS (SELECT 1 FROM job_nodes n
                       WHERE n.name = jobs.attempted_by[cardinality(jobs.attempted_by)] AND ",
    crate::liveness::lock_lost!("n", "clock.now", "$6"),
    ")))",
    ")
LIMIT $4
FOR UPDATE OF jobs SKIP LOCKED"
);

// $1 now, $2 the node, $3 grace (ms), $4 and $5 the (job, attempt) runs it holds.
const PICK_ORPHANS: &str = concat!(
    "WITH clock AS (SELECT COALESCE($1::timestamptz, now()) AS now)
SELECT ",
    stuck_columns!(),
    ", false AS timed_out, false AS gone
FROM jobs, clock
WHERE jobs.state = 'running'
  AND jobs.attempted_by[cardinality(jobs.attempted_by)] = $2
  AND jobs.attempted_at < clock.now - $3 * interval '1 millisecond'
  AND (jobs.id, jobs.attempt) NOT IN (SELECT * FROM unnest($4::int8[], $5::int4[]))
LIMIT 1000
FOR UPDATE OF jobs SKIP LOCKED"
);

/// A picked job with what decides its fate (see [`jobs_driver::Stuck`]).
#[derive(QueryableByName)]
struct StuckRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Int4)]
    attempt: i32,
    #[diesel(sql_type = Int4)]
    max_attempts: i32,
    #[diesel(sql_type = Bool)]
    cancel_requested: bool,
    #[diesel(sql_type = Bool)]
    held: bool,
    #[diesel(sql_type = Int4)]
    uncertain_rescues: i32,
    #[diesel(sql_type = Nullable<Text>)]
    node: Option<String>,
    #[diesel(sql_type = Nullable<diesel::sql_types::Bytea>)]
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

// Writes each fate ($1 ids, $2 states, $3 attempts allowed, $4 error entries) to a job
// still running, its entry's time the database's, and wakes the queues that got jobs back.
const WRITE_FATES: &str = concat!(
    "WITH clock AS (SELECT COALESCE($5::timestamptz, now()) AS now),
rescued AS (
    UPDATE jobs
    -- A workflow step going back never runs past a dependency that failed it while it
    -- ran (retried, then failed): held in `pending` where its workflow holds, cancelled
    -- naming it where it cancels (as `complete.rs`'s `REQUESTED_STATE`); one whose
    -- dependency was retried while it ran waits for it again.
    SET state = CASE WHEN f.state <> 'available' THEN f.state::job_state
                     WHEN jobs.failed_on > 0 AND ",
    holds_on_failure!("jobs"),
    " THEN 'pending'
                     WHEN jobs.failed_on > 0 THEN 'cancelled'
                     WHEN jobs.waiting_on > 0 THEN 'pending' ELSE 'available' END,
        max_attempts = f.max_attempts,
        finalized_at = CASE WHEN f.state <> 'available' OR jobs.failed_on > 0 AND NOT ",
    holds_on_failure!("jobs"),
    " THEN clock.now END,
        errors = jobs.errors || jsonb_build_array(f.entry::jsonb || jsonb_build_object('at', clock.now))
                 || CASE WHEN f.state = 'available' AND jobs.failed_on > 0 AND NOT ",
    holds_on_failure!("jobs"),
    " THEN ",
    failed_dependency_entry!("jobs", "clock.now"),
    " ELSE '[]'::jsonb END,
        -- A job that ends in one of its unique states while another job holds its key,
        -- or takes it by this rescue (going back, or ending earlier in id order in one of
        -- its own unique states), gives the key up: the unique index never fails the
        -- rescue, and at most one job of a key keeps it.
        unique_key = CASE WHEN f.state <> 'available' AND f.state::job_state = ANY (jobs.unique_states)
                               AND (EXISTS (SELECT 1 FROM jobs o WHERE o.unique_key = jobs.unique_key
                                            AND o.state = ANY (o.unique_states) AND o.id <> jobs.id)
                                    OR EXISTS (SELECT 1 FROM unnest($1::int8[], $2::text[]) AS g(id, state)
                                               JOIN jobs a ON a.id = g.id
                                               WHERE a.unique_key = jobs.unique_key AND a.id <> jobs.id
                                                 AND g.state::job_state = ANY (a.unique_states)
                                                 AND (g.state = 'available' OR a.id < jobs.id)))
                          THEN NULL ELSE jobs.unique_key END
    FROM unnest($1::int8[], $2::text[], $3::int4[], $4::text[]) AS f(id, state, max_attempts, entry), clock
    WHERE jobs.id = f.id AND jobs.state = 'running'
    RETURNING jobs.id, jobs.queue, jobs.state
), woken AS (
    SELECT pg_notify('",
    available_channel!(),
    "', queue) FROM (SELECT DISTINCT queue FROM rescued WHERE state = 'available') AS q
)
SELECT id FROM rescued, (SELECT count(*) FROM woken) AS w"
);

/// Gives each of `stuck` its fate ([`RescueFate::decide_all`]) in one statement; returns the
/// ids written.
async fn write_fates<C>(
    conn: &mut C,
    stuck: Vec<Stuck>,
    rescuer: &str,
    max_node_losses: i32,
    now: Option<DateTime<Utc>>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    if stuck.is_empty() {
        return Ok(Vec::new());
    }
    let at = now.unwrap_or_else(Utc::now);
    let fates = RescueFate::decide_all(&stuck, rescuer, max_node_losses, at);
    let ids: Vec<i64> = fates.iter().map(|f| f.id).collect();
    let states: Vec<&str> = fates.iter().map(|f| f.state.as_str()).collect();
    let allowed: Vec<i32> = fates.iter().map(|f| f.max_attempts).collect();
    let entries: Vec<String> = fates.iter().map(|f| f.entry.to_string()).collect();
    let rows: Vec<Id> = diesel::sql_query(WRITE_FATES)
        .bind::<Array<BigInt>, _>(ids)
        .bind::<Array<Text>, _>(states)
        .bind::<Array<Int4>, _>(allowed)
        .bind::<Array<Text>, _>(entries)
        .bind::<Nullable<Timestamptz>, _>(now)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// See [`JobReleaseOrphansParams`].
pub(crate) async fn release_orphans(
    conn: &mut AsyncPgConnection,
    params: JobReleaseOrphansParams<'_>,
) -> Result<Vec<i64>> {
    let (ids, attempts): (Vec<i64>, Vec<i32>) = params.held.iter().copied().unzip();
    conn.transaction::<_, DriverError, _>(async |tx| {
        let picked: Vec<StuckRow> = diesel::sql_query(PICK_ORPHANS)
            .bind::<Nullable<Timestamptz>, _>(params.now)
            .bind::<Text, _>(params.node)
            .bind::<BigInt, _>(millis(params.grace))
            .bind::<Array<BigInt>, _>(&ids)
            .bind::<Array<Int4>, _>(&attempts)
            .load(tx)
            .await?;
        let stuck = picked.into_iter().map(|r| r.stuck(RescueReason::Orphaned)).collect();
        // An orphan never ran: it is never discarded for its node losses.
        write_fates(tx, stuck, params.node, i32::MAX, params.now).await
    })
    .await
}

/// See [`JobRescueStuckParams`].
pub(crate) async fn rescue_stuck(
    conn: &mut AsyncPgConnection,
    params: JobRescueStuckParams<'_>,
) -> Result<Vec<i64>> {
    conn.transaction::<_, DriverError, _>(async |tx| {
        let picked: Vec<StuckRow> = diesel::sql_query(PICK_STUCK)
            .bind::<Nullable<Timestamptz>, _>(params.now)
            .bind::<BigInt, _>(millis(params.node_stale_after))
            .bind::<BigInt, _>(millis(params.timeout_grace))
            .bind::<BigInt, _>(params.limit)
            .bind::<Bool, _>(params.lost_nodes)
            .bind::<BigInt, _>(millis(params.lock_lost_grace))
            .bind::<Bool, _>(params.lost_nodes_by_lock)
            .load(tx)
            .await?;
        let stuck = picked.into_iter().map(|r| r.stuck(RescueReason::NodeLost)).collect();
        write_fates(tx, stuck, params.rescuer, params.max_node_losses, params.now).await
    })
    .await
}
