//! The parameters of each job operation of the [`Driver`](crate::Driver), one struct per
//! operation. Times are `Option<DateTime<Utc>>`: `None` means the database's own clock
//! (production), `Some` an injected clock (tests).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::execution::Completion;
use super::filter::JobFilter;
use super::new_job::NewJob;
use crate::state::JobState;

/// `job_insert_many`: insert `jobs` in input order; a job whose uniqueness key is held in
/// one of its unique states comes back as the existing job.
#[derive(Debug, Clone, Copy)]
pub struct JobInsertManyParams<'a> {
    /// The rows, validated.
    pub jobs: &'a [NewJob],
    /// The insert's time (and the base of `delay_ms`).
    pub now: Option<DateTime<Utc>>,
}

/// `job_insert_full_many`: insert rows exactly as given, in any state, in input order.
/// For test factories that need jobs in a given state without driving them there.
#[derive(Debug, Clone, Copy)]
pub struct JobInsertFullManyParams<'a> {
    /// The rows.
    pub jobs: &'a [JobInsertFull],
}

/// One row for `job_insert_full_many`: every column.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInsertFull {
    /// Kind.
    pub kind: String,
    /// Queue.
    pub queue: String,
    /// State.
    pub state: JobState,
    /// Arguments.
    pub args: Value,
    /// Metadata.
    pub meta: Value,
    /// Tags.
    pub tags: Vec<String>,
    /// Priority.
    pub priority: i16,
    /// Claims so far.
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Per-attempt limit in milliseconds.
    pub timeout_ms: Option<i64>,
    /// Insert time (`None`: now).
    pub created_at: Option<DateTime<Utc>>,
    /// Due time (`None`: now).
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Latest claim time.
    pub attempted_at: Option<DateTime<Utc>>,
    /// Finish time.
    pub finalized_at: Option<DateTime<Utc>>,
    /// Nodes of the claims, oldest first.
    pub attempted_by: Vec<String>,
    /// Error entries.
    pub errors: Vec<Value>,
    /// Result.
    pub result: Option<Value>,
    /// When a cancellation was requested.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Uniqueness key hash and states.
    pub unique: Option<(Vec<u8>, Vec<JobState>)>,
}

/// `job_get`: one job by id.
#[derive(Debug, Clone, Copy)]
pub struct JobGetParams {
    /// The id.
    pub id: i64,
}

/// `job_claim`: take up to `limit` available jobs of `queue` for `node`, highest priority
/// first, then the longest due, then the oldest; skip rows other claimers hold; a paused
/// queue yields nothing. Claimed rows become `running`, their attempt incremented,
/// `attempted_at` stamped and `node` appended to `attempted_by`.
#[derive(Debug, Clone, Copy)]
pub struct JobClaimParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// The most jobs to claim.
    pub limit: usize,
    /// The claiming node.
    pub node: &'a str,
    /// The claim's time.
    pub now: Option<DateTime<Utc>>,
    /// The worker claims this size again and again (its batch): a driver may keep a
    /// statement planned for it.
    pub recurring_size: bool,
    /// The queue had cluster-wide limits when the worker last read its settings, or the
    /// worker declares some: the driver claims in a transaction that locks the queue's
    /// row, reads the limits and the usage there, claims what they allow (per key in
    /// turn with a per-key limit), and stores the usage; see
    /// [`claim_limited`](crate::limited_claim::claim_limited). Claims from every node on
    /// the queue then run one after another. When
    /// `false`, limits set since the worker's last read apply from its next poll.
    ///
    /// [`ClaimLimits::allowance`]: crate::ClaimLimits::allowance
    pub limited: bool,
    /// The limits the worker declares for the queue, applied where its stored settings
    /// set none (see [`DeclaredLimits`](crate::DeclaredLimits)); with any declared, the
    /// worker sets `limited`.
    pub declared: crate::queue_limits::DeclaredLimits,
    /// Runs of this node, as (job, attempt), whose handler has ended but whose outcome is
    /// not written yet: under a limit they no longer count as running (they run nothing),
    /// so the room they leave is taken at once rather than after the write. A run listed
    /// here whose row has moved on (written, or rescued and claimed at the next attempt)
    /// changes nothing. Never list a hand-back that gives its attempt number back: the
    /// job's next run has the same number.
    pub ended: &'a [(i64, i32)],
}

/// `job_complete_many`: write outcomes, each fenced on the row still being `running` at
/// the claimed attempt. Returns the ids that applied.
#[derive(Debug, Clone, Copy)]
pub struct JobCompleteManyParams<'a> {
    /// The outcomes.
    pub completions: &'a [Completion],
    /// The write's time (finish time, base of delays).
    pub now: Option<DateTime<Utc>>,
}

/// `job_schedule_due`: make up to `limit` scheduled and retryable jobs whose time has
/// come available, and wake their queues. Returns how many moved.
#[derive(Debug, Clone, Copy)]
pub struct JobScheduleDueParams {
    /// The most jobs to move.
    pub limit: i64,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `job_rescue_stuck`: take back the `running` jobs that nobody runs any more — their node
/// is gone (its liveness lock is free and its heartbeat older than `lock_lost_grace`, or
/// it has not heartbeated within `node_stale_after`, or it has no row, or its process
/// started after the claim: an earlier process of the same name claimed it), or they are still
/// running `timeout_grace` past their timeout — and give each the fate
/// [`RescueFate::decide`](crate::RescueFate::decide) says: back `available` in its place
/// in line (priority and `scheduled_at` unchanged, its queue woken), a lost node's attempt
/// not counted; `discarded` or `cancelled` otherwise; each with an error entry
/// `rescued_node_lost` or `rescued_timeout`. The attempt number is unchanged (fencing out
/// a late outcome). Returns the rescued ids.
#[derive(Debug, Clone, Copy)]
pub struct JobRescueStuckParams<'a> {
    /// A node silent this long is gone, even if its liveness lock is held (a frozen
    /// process, a pooler between it and the database).
    pub node_stale_after: Duration,
    /// A node whose liveness lock is free (its process is gone: its connection closed or
    /// its file lock released) is gone once its heartbeat is this old. A live node whose
    /// lock connection broke takes the lock again at its next heartbeat, so this is longer
    /// than the heartbeat interval.
    pub lock_lost_grace: Duration,
    /// How long past its timeout a job may run before it is rescued.
    pub timeout_grace: Duration,
    /// Rescue the jobs of silent nodes, and of nodes with no row (`false`: the rescuer's
    /// own database calls were failing lately, so other nodes' silence may be the
    /// database's, not theirs).
    pub lost_nodes: bool,
    /// Rescue the jobs of nodes whose liveness lock is free (`false`: the rescuer's own
    /// database calls failed too lately for live nodes to have taken their locks again,
    /// as a database restart frees every lock).
    pub lost_nodes_by_lock: bool,
    /// A job rescued this many times without knowing whether it ran (its node lost, or
    /// past its timeout on its last attempt; see [`RescueFate`](crate::RescueFate)) is
    /// discarded, not handed back.
    pub max_node_losses: i32,
    /// The most jobs to rescue.
    pub limit: i64,
    /// The rescuing node (named in the error entry).
    pub rescuer: &'a str,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `job_release_orphans`: take back, as a rescue would (`rescued_orphaned`: the attempt
/// does not count, see [`RescueFate::decide`](crate::RescueFate::decide)), the `running`
/// jobs attributed to `node` at an attempt it does not hold, claimed more than `grace`
/// ago: claims whose reply never reached the node. A run is identified by its job and
/// attempt: a job the node ran before (rescued from it, then claimed by it again) is held
/// only at the attempt it runs now. Returns their ids.
#[derive(Debug, Clone, Copy)]
pub struct JobReleaseOrphansParams<'a> {
    /// The node.
    pub node: &'a str,
    /// The runs the node holds, (job, attempt): running, buffered, or with an outcome not
    /// yet written.
    pub held: &'a [(i64, i32)],
    /// Claims younger than this are left alone (they may still be in flight).
    pub grace: Duration,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `job_archive`: move at most `limit` finished jobs out of the jobs table into the
/// archive ([`Capability::Archive`](crate::Capability::Archive)), except those that hold
/// their uniqueness key (a final state among their unique states), which stay where the
/// unique index sees them. Returns how many moved; a driver without an archive moves none.
#[derive(Debug, Clone, Copy)]
pub struct JobArchiveParams {
    /// The most rows to move.
    pub limit: i64,
}

/// `job_prune`: delete jobs in final state `state` finalized more than `retention` ago,
/// oldest first: at most `limit` from each table that holds finished jobs (the jobs table
/// and, with [`Capability::Archive`](crate::Capability::Archive), the archive). Returns
/// how many went.
#[derive(Debug, Clone, Copy)]
pub struct JobPruneParams {
    /// A final state.
    pub state: JobState,
    /// How long to keep them.
    pub retention: Duration,
    /// The most rows to delete.
    pub limit: i64,
    /// Now.
    pub now: Option<DateTime<Utc>>,
}

/// `job_cancel_many`: cancel the jobs that are not finished. One that is not running is
/// cancelled at once; a running one is marked, and its node told (by notification where
/// the driver has them, else at its next heartbeat), so it ends cancelled. Returns the
/// state of each job it changed: `cancelled`, or `running` for those told to stop.
#[derive(Debug, Clone, Copy)]
pub struct JobCancelManyParams<'a> {
    /// The jobs.
    pub ids: &'a [i64],
}

/// `job_retry_many`: make the jobs that are neither running nor pending (waiting for their
/// dependencies: a retry does not skip them) available now, granting one more attempt to
/// those that used them all. A job whose uniqueness key (unique when available) another
/// job holds is left as it is and reported ([`Retried::key_held`]), as
/// is one whose key an earlier job (by id) of the same call takes: the rest of the call
/// goes on. Returns what changed.
#[derive(Debug, Clone, Copy)]
pub struct JobRetryManyParams<'a> {
    /// The jobs.
    pub ids: &'a [i64],
}

/// What [`job_retry_many`](crate::Driver::job_retry_many) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retried {
    /// How many jobs became available.
    pub retried: i64,
    /// The jobs left as they were because another job holds their uniqueness key.
    pub key_held: Vec<i64>,
}

/// `job_delete_many`: delete the jobs that are not running. Returns how many went.
#[derive(Debug, Clone, Copy)]
pub struct JobDeleteManyParams<'a> {
    /// The jobs.
    pub ids: &'a [i64],
}

/// `job_list_cancel_requested`: which of `ids` are running with a cancellation requested
/// (the heartbeat's question when the driver cannot push notifications).
#[derive(Debug, Clone, Copy)]
pub struct JobListCancelRequestedParams<'a> {
    /// The jobs a node runs.
    pub ids: &'a [i64],
}

/// `job_list` and `job_list_ids`: the jobs matching `filter` with id below `before`,
/// newest first, at most `limit`.
#[derive(Debug, Clone, Copy)]
pub struct JobListParams<'a> {
    /// The selection.
    pub filter: &'a JobFilter,
    /// Keyset: only ids beyond this in the filter's order (below it newest first, above it
    /// oldest first).
    pub before: Option<i64>,
    /// Page size.
    pub limit: i64,
}

/// `job_count`: how many jobs match `filter`, exactly up to `cap`.
#[derive(Debug, Clone, Copy)]
pub struct JobCountParams<'a> {
    /// The selection.
    pub filter: &'a JobFilter,
    /// Count exactly up to this many.
    pub cap: i64,
}

/// `job_count_by_queue_and_state`: every (queue, state) pair's count. A full scan, for
/// the CLI's `stats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JobCountByQueueAndStateParams {}

/// `job_list_waiting`: the jobs waiting to run (available, scheduled or retryable) of
/// `kind`, on `queue`, whose arguments contain `args` (JSON containment), each filter
/// applied when given; oldest first. For test assertions.
#[derive(Debug, Clone, Copy, Default)]
pub struct JobListWaitingParams<'a> {
    /// Kind.
    pub kind: Option<&'a str>,
    /// Queue.
    pub queue: Option<&'a str>,
    /// A subset of the arguments.
    pub args: Option<&'a Value>,
}
