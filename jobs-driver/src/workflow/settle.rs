//! Settling finished dependencies, and re-opening retried ones: the rules of
//! `docs/design/workflows.md`, "Settling" and "Retry".

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::definition::{Needs, OnFailure};
use super::params::Settled;
use super::plan::IDS_PER_STATEMENT;
use super::store::{DependencyState, JobUpdate, Locked, Transition, WorkflowStore};
use crate::error::Result;
use crate::state::JobState;

/// How many rounds of a cascade (dependents cancelled, then theirs, …; or brought back,
/// then theirs) one call runs before it leaves the rest to the next call or the
/// settler's sweep.
pub const MAX_CASCADE_ROUNDS: usize = 8;

/// The most dependents one [`reopen`] round re-opens edges into (a fan-out wider than
/// this re-opens the rest at the job's next retry).
pub const REOPEN_LIMIT: usize = 100_000;

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
/// locks the dependents, writes each edge's outcome (and the result a dependent that needs
/// completion may read), changes their counters by the edges settled, releases the
/// `pending` ones whose every dependency finished as they need, and cancels those of
/// workflows that cancel on failure once a dependency failed them. Idempotent: an edge is
/// settled once, under its dependent's lock.
pub async fn settle_round<S: WorkflowStore + ?Sized>(
    store: &mut S,
    finished: &[i64],
    limit: usize,
    now: Option<DateTime<Utc>>,
) -> Result<SettleRound> {
    let mut round = SettleRound::default();
    let outcomes = final_outcomes(store, finished).await?;
    let candidates: Vec<i64> = outcomes.keys().copied().collect();
    if candidates.is_empty() {
        return Ok(round);
    }
    let dependents = store.dependents(&candidates, false, limit).await?;
    round.more = dependents.len() >= limit;
    if dependents.is_empty() {
        return Ok(round);
    }
    let locked = store.lock_jobs(&dependents).await?;
    // Read again under the locks: a retry that committed meanwhile made a job unfinished.
    let outcomes = final_outcomes(store, &candidates).await?;
    let candidates: Vec<i64> = outcomes.keys().copied().collect();
    let edges = store.edges(&candidates, &dependents, false).await?;

    let mut rows: HashMap<i64, Counters> = locked.iter().map(|l| (l.id, Counters::of(l))).collect();
    let mut writes: BTreeMap<(i64, bool), Vec<i64>> = BTreeMap::new();
    let mut gone = BTreeSet::new();
    for edge in &edges {
        let Some((outcome, _)) = outcomes.get(&edge.depends_on) else { continue };
        let Some(row) = rows.get_mut(&edge.job_id) else {
            gone.insert(edge.job_id);
            continue;
        };
        row.waiting_on -= 1;
        if !edge.needs.met_by(*outcome) {
            row.failed_on += 1;
            row.failure.get_or_insert((edge.depends_on, *outcome));
        }
        let copy_result = *outcome == JobState::Completed && edge.needs == Needs::Completed;
        writes.entry((edge.depends_on, copy_result)).or_default().push(edge.job_id);
        round.settled += 1;
    }
    for ((depends_on, copy_result), job_ids) in &writes {
        let (outcome, result) = &outcomes[depends_on];
        let result = if *copy_result { result.as_ref() } else { None };
        for chunk in job_ids.chunks(IDS_PER_STATEMENT) {
            store.set_outcome(*depends_on, chunk, Some(*outcome), result).await?;
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

/// What [`reopen`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reopened {
    /// Edges re-opened.
    pub reopened: usize,
    /// Dependents sent back to `pending`: not yet run (`available`, `scheduled`), or
    /// cancelled because a dependency failed them (in a workflow that cancels) and now
    /// failed by none.
    pub pended: Vec<i64>,
}

/// Re-opens the settled edges out of those of `jobs` that are unfinished again (retried),
/// each of their dependents counting it as unsettled again (and no longer as failed if it
/// was), in cascade rounds: a dependent brought back re-opens its own edges in the next.
/// Runs in the store's transaction, after the retry's own statement.
pub async fn reopen<S: WorkflowStore + ?Sized>(
    store: &mut S,
    jobs: &[i64],
    now: Option<DateTime<Utc>>,
) -> Result<Reopened> {
    let mut done = Reopened::default();
    let mut round: Vec<i64> = jobs.to_vec();
    for _ in 0..MAX_CASCADE_ROUNDS {
        if round.is_empty() {
            break;
        }
        let unfinished = unfinished_of(store, &round).await?;
        let dependents = store.dependents(&unfinished, true, REOPEN_LIMIT).await?;
        if dependents.is_empty() {
            break;
        }
        let locked = store.lock_jobs(&dependents).await?;
        let unfinished = unfinished_of(store, &unfinished).await?;
        let edges = store.edges(&unfinished, &dependents, true).await?;
        let mut rows: HashMap<i64, Counters> = locked.iter().map(|l| (l.id, Counters::of(l))).collect();
        let mut by_dependency: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for edge in &edges {
            let Some(row) = rows.get_mut(&edge.job_id) else { continue };
            row.waiting_on += 1;
            if edge.outcome.is_some_and(|o| !edge.needs.met_by(o)) {
                row.failed_on -= 1;
            }
            by_dependency.entry(edge.depends_on).or_default().push(edge.job_id);
            done.reopened += 1;
        }
        for (depends_on, job_ids) in &by_dependency {
            for chunk in job_ids.chunks(IDS_PER_STATEMENT) {
                store.set_outcome(*depends_on, chunk, None, None).await?;
            }
        }
        let mut next = Vec::new();
        let mut updates: BTreeMap<(i32, i32, Transition), Vec<i64>> = BTreeMap::new();
        for l in &locked {
            let row = &rows[&l.id];
            if !row.changed(l) {
                continue;
            }
            let revived = l.state == JobState::Cancelled
                && l.on_failure == OnFailure::Cancel
                && l.failed_on > 0
                && row.failed_on <= 0;
            let transition = if revived || matches!(l.state, JobState::Available | JobState::Scheduled) {
                done.pended.push(l.id);
                if revived {
                    next.push(l.id);
                }
                Transition::Pend
            } else {
                Transition::Keep
            };
            updates.entry((row.waiting_on.max(0), row.failed_on.max(0), transition)).or_default().push(l.id);
        }
        apply(store, updates, now).await?;
        round = next;
    }
    Ok(done)
}

/// A dependent's counters as the round changes them, and the first dependency that
/// failed it in this round.
struct Counters {
    waiting_on: i32,
    failed_on: i32,
    failure: Option<(i64, JobState)>,
}

impl Counters {
    fn of(l: &Locked) -> Counters {
        Counters { waiting_on: l.waiting_on, failed_on: l.failed_on, failure: None }
    }

    fn changed(&self, l: &Locked) -> bool {
        self.waiting_on != l.waiting_on || self.failed_on != l.failed_on
    }
}

/// The jobs of `ids` that are finished, with their outcome and result; those that are
/// gone count as cancelled.
async fn final_outcomes<S: WorkflowStore + ?Sized>(
    store: &mut S,
    ids: &[i64],
) -> Result<BTreeMap<i64, (JobState, Option<Value>)>> {
    let states: HashMap<i64, DependencyState> =
        store.dependency_states(ids).await?.into_iter().map(|s| (s.id, s)).collect();
    Ok(ids
        .iter()
        .filter_map(|id| match states.get(id) {
            None => Some((*id, (JobState::Cancelled, None))),
            Some(s) if s.state.is_final() => Some((*id, (s.state, s.result.clone()))),
            Some(_) => None,
        })
        .collect())
}

/// The jobs of `ids` that exist and are not finished.
async fn unfinished_of<S: WorkflowStore + ?Sized>(store: &mut S, ids: &[i64]) -> Result<Vec<i64>> {
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

async fn apply<S: WorkflowStore + ?Sized>(
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
