//! Settling finished dependencies: the rules of `docs/design/workflows.md`, "Settling"
//! (re-opening retried ones is in `reopen`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::definition::{Needs, OnFailure};
use super::params::{JobSettleParams, Settled};
use super::plan::IDS_PER_STATEMENT;
use super::store::{JobUpdate, Locked, Transition, WorkflowStore};
use crate::error::Result;
use crate::state::JobState;

/// How many rounds of a settle's cascade (dependents cancelled, then theirs, …) one call
/// runs before it leaves the rest to the settler's sweep (a cancelled dependent is a
/// finished job with unsettled edges out, which the sweep finds).
pub const MAX_CASCADE_ROUNDS: usize = 8;

/// An edge by its key: `(depends_on, job_id)`.
type EdgeKey = (i64, i64);

/// What one [`settle_round`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettleRound {
    /// Edges settled.
    pub settled: usize,
    /// Dependents that became due (`available` or `scheduled`).
    pub released: Vec<i64>,
    /// Dependents cancelled because a dependency failed them: finished jobs whose own
    /// dependents the next round settles.
    pub cancelled: Vec<i64>,
    /// The round stopped at its limit of dependents: call it again with the same jobs.
    pub more: bool,
}

/// Settles the unsettled edges out of those of `finished` that are finished or gone (a
/// gone dependency settles as `cancelled`), for at most `limit` dependents, ascending:
/// share-locks the dependencies (a retry of one waits for this transaction, and then sees
/// the edges it settled), locks the dependents, writes each edge's outcome (and the result
/// a dependent that needs completion may read), changes their counters by the edges
/// settled, releases the `pending` ones whose every dependency finished as they need, and
/// cancels those of workflows that cancel on failure once a dependency failed them.
/// Idempotent: an edge is settled once, under its dependent's lock.
///
/// With `skip_locked` (an eager settle, which must never wait for an application's
/// transaction), a dependency or dependent another transaction holds is left for the
/// sweep.
pub async fn settle_round<S: WorkflowStore + ?Sized>(
    store: &mut S,
    finished: &[i64],
    limit: usize,
    now: Option<DateTime<Utc>>,
    skip_locked: bool,
) -> Result<SettleRound> {
    let mut round = SettleRound::default();
    let (present, gone_dependencies) = finished_or_gone(store, finished).await?;
    let candidates: Vec<i64> = present.iter().chain(&gone_dependencies).copied().collect();
    if candidates.is_empty() {
        return Ok(round);
    }
    let dependents = store.dependents(&candidates, false, limit).await?;
    if dependents.is_empty() {
        return Ok(round);
    }
    // Locked, the dependencies are read as they are now: one a retry made unfinished
    // meanwhile is left out; one that went meanwhile is left to the next settle.
    let mut outcomes: BTreeMap<i64, (JobState, Option<Value>)> = store
        .lock_dependencies(&present, skip_locked)
        .await?
        .into_iter()
        .filter(|s| s.state.is_final())
        .map(|s| (s.id, (s.state, s.result)))
        .collect();
    outcomes.extend(gone_dependencies.iter().map(|id| (*id, (JobState::Cancelled, None))));
    if outcomes.is_empty() {
        return Ok(round);
    }
    let locked = store.lock_jobs(&dependents, skip_locked).await?;
    let candidates: Vec<i64> = outcomes.keys().copied().collect();
    let edges = store.edges(&candidates, &dependents, false).await?;

    let mut rows: HashMap<i64, Counters> = locked.iter().map(|l| (l.id, Counters::of(l))).collect();
    // Edges settled alike in one statement: by outcome, and by dependency only where its
    // result is copied (a fan-in of 10,000 members settles in a statement or two).
    let mut writes: BTreeMap<(JobState, Option<i64>), Vec<EdgeKey>> = BTreeMap::new();
    let mut gone = BTreeSet::new();
    for edge in &edges {
        let Some((outcome, _)) = outcomes.get(&edge.depends_on) else { continue };
        let Some(row) = rows.get_mut(&edge.job_id) else {
            // Without `skip_locked`, a dependent not locked is gone; with it, it may be
            // held: the sweep settles it.
            if !skip_locked {
                gone.insert(edge.job_id);
            }
            continue;
        };
        row.waiting_on -= 1;
        if !edge.needs.met_by(*outcome) {
            row.failed_on += 1;
            row.failure.get_or_insert((edge.depends_on, *outcome));
        }
        let copy_result = *outcome == JobState::Completed && edge.needs == Needs::Completed;
        let from = copy_result.then_some(edge.depends_on);
        writes.entry((*outcome, from)).or_default().push((edge.depends_on, edge.job_id));
        round.settled += 1;
    }
    round.more = dependents.len() >= limit && round.settled > 0;
    for ((outcome, from), pairs) in &writes {
        let result = from.and_then(|d| outcomes.get(&d)).and_then(|(_, r)| r.as_ref());
        for chunk in pairs.chunks(IDS_PER_STATEMENT) {
            store.set_outcome(chunk, Some(*outcome), result).await?;
        }
    }
    if !gone.is_empty() {
        let gone: Vec<i64> = gone.into_iter().collect();
        store.delete_edges_into(&gone).await?;
    }

    let mut updates: BTreeMap<(i32, i32, Transition), Vec<i64>> = BTreeMap::new();
    for l in &locked {
        let row = &rows[&l.id];
        if !row.changed(l) {
            continue;
        }
        let transition = match (l.state, row.failure) {
            (JobState::Pending, Some((dependency, outcome)))
                if row.failed_on > 0 && l.on_failure == OnFailure::Cancel =>
            {
                round.cancelled.push(l.id);
                Transition::Cancel { dependency, outcome }
            }
            (JobState::Pending, _) if row.waiting_on <= 0 && row.failed_on <= 0 => {
                round.released.push(l.id);
                Transition::Release
            }
            _ => Transition::Keep,
        };
        updates.entry((row.waiting_on.max(0), row.failed_on.max(0), transition)).or_default().push(l.id);
    }
    apply(store, updates, now).await?;
    Ok(round)
}

/// Runs `round` (a driver's transaction around [`settle_round`]) on `first`, then on
/// the dependents each round cancelled (and again on the same jobs when a round stopped
/// at its limit), for at most [`MAX_CASCADE_ROUNDS`] rounds; adds up what they did.
pub async fn settle_cascade<F, Fut>(first: Vec<i64>, mut round: F) -> Result<Settled>
where
    F: FnMut(Vec<i64>) -> Fut,
    Fut: std::future::Future<Output = Result<SettleRound>>,
{
    let mut done = Settled::default();
    let mut jobs = first;
    for _ in 0..MAX_CASCADE_ROUNDS {
        if jobs.is_empty() {
            return Ok(done);
        }
        let this = round(jobs.clone()).await?;
        done.settled += this.settled;
        done.released += this.released.len();
        done.cancelled += this.cancelled.len();
        jobs = if this.more {
            jobs.extend(&this.cancelled);
            jobs
        } else {
            this.cancelled
        };
    }
    done.more = !jobs.is_empty();
    Ok(done)
}

/// The most dependents per transaction of the settle after a person's cancel or delete.
const SETTLE_AFTER_CONTROL_LIMIT: usize = 1_000;

/// Settles the edges out of `ids`, which a person just cancelled or deleted (and
/// committed), through `settle` (the driver's `job_settle`): a failure is logged, and
/// left to the settler's sweep (the cancel or delete itself stands).
pub async fn settle_after_control<'a, F, Fut>(ids: &'a [i64], settle: F)
where
    F: FnOnce(JobSettleParams<'a>) -> Fut,
    Fut: std::future::Future<Output = Result<Settled>>,
{
    let params =
        JobSettleParams { finished: Some(ids), after: 0, limit: SETTLE_AFTER_CONTROL_LIMIT, now: None };
    if let Err(e) = settle(params).await {
        tracing::warn!(error = %e, "settling after a cancel or a delete failed: the settler will");
    }
}

/// A dependent's counters as the round changes them, and the first dependency that
/// failed it in this round.
pub(super) struct Counters {
    pub(super) waiting_on: i32,
    pub(super) failed_on: i32,
    pub(super) failure: Option<(i64, JobState)>,
}

impl Counters {
    pub(super) fn of(l: &Locked) -> Counters {
        Counters { waiting_on: l.waiting_on, failed_on: l.failed_on, failure: None }
    }

    pub(super) fn changed(&self, l: &Locked) -> bool {
        self.waiting_on != l.waiting_on || self.failed_on != l.failed_on
    }
}

/// Of `ids`, as last committed (no lock): those that are finished, and those that are
/// gone (which settle as cancelled), each ascending.
async fn finished_or_gone<S: WorkflowStore + ?Sized>(
    store: &mut S,
    ids: &[i64],
) -> Result<(Vec<i64>, Vec<i64>)> {
    let states: HashMap<i64, JobState> =
        store.dependency_states(ids).await?.into_iter().map(|s| (s.id, s.state)).collect();
    let ids: BTreeSet<i64> = ids.iter().copied().collect();
    let finished = ids.iter().filter(|id| states.get(id).is_some_and(|s| s.is_final())).copied().collect();
    let gone = ids.iter().filter(|id| !states.contains_key(id)).copied().collect();
    Ok((finished, gone))
}

/// The jobs of `ids` that exist and are not finished.
pub(super) async fn unfinished_of<S: WorkflowStore + ?Sized>(store: &mut S, ids: &[i64]) -> Result<Vec<i64>> {
    let mut ids: Vec<i64> = store
        .dependency_states(ids)
        .await?
        .into_iter()
        .filter(|s| !s.state.is_final())
        .map(|s| s.id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

pub(super) async fn apply<S: WorkflowStore + ?Sized>(
    store: &mut S,
    updates: BTreeMap<(i32, i32, Transition), Vec<i64>>,
    now: Option<DateTime<Utc>>,
) -> Result<()> {
    for ((waiting_on, failed_on, transition), ids) in updates {
        for chunk in ids.chunks(IDS_PER_STATEMENT) {
            let update =
                JobUpdate { ids: chunk.to_vec(), waiting_on, failed_on, workflow_id: None, transition, now };
            store.update_jobs(&update).await?;
        }
    }
    Ok(())
}
