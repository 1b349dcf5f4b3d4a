//! Re-opening retried dependencies: the rules of `docs/design/workflows.md`, "Retry";
//! and cancelling again a step a dependency still fails.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use super::definition::OnFailure;
use super::plan::IDS_PER_STATEMENT;
use super::settle::{Counters, apply, unfinished_of};
use super::store::{Locked, Transition, WorkflowStore};
use crate::error::Result;
use crate::state::JobState;

/// The most dependents one [`reopen`] round re-opens edges into (a fan-out wider than
/// this takes more rounds).
pub const REOPEN_LIMIT: usize = 100_000;

/// What [`reopen`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reopened {
    /// Edges re-opened.
    pub reopened: usize,
    /// Dependents sent back to `pending`: not yet run or waiting to run again
    /// (`available`, `scheduled`, `retryable`), or cancelled because a dependency failed
    /// them (in a workflow that cancels) and now failed by none.
    pub pended: Vec<i64>,
    /// Retried jobs cancelled again at once: steps of a workflow that cancels on failure,
    /// a dependency of which still failed them (retry that dependency instead).
    pub recancelled: Vec<i64>,
}

/// Runs after a retry of `jobs`, in the retry's transaction (after its own statement).
///
/// A retried step of a workflow that cancels on failure, that a dependency still fails,
/// is cancelled again at once (error entry naming that dependency): it could never run.
/// Then the settled edges out of those of `jobs` that are unfinished again re-open: each
/// of their dependents counts the edge as unsettled again (and no longer as failed if it
/// was), and one that would run before the dependency reruns, or one a dependency's
/// failure cancelled and that no other failure holds, goes back to `pending`; in cascade
/// rounds, until none is left (a dependent brought back re-opens its own edges in the
/// next).
pub async fn reopen<S: WorkflowStore + ?Sized>(
    store: &mut S,
    jobs: &[i64],
    now: Option<DateTime<Utc>>,
) -> Result<Reopened> {
    let mut done = Reopened::default();
    recancel(store, jobs, now, &mut done).await?;
    let mut round: Vec<i64> = jobs.to_vec();
    while !round.is_empty() {
        let unfinished = unfinished_of(store, &round).await?;
        let dependents = store.dependents(&unfinished, true, REOPEN_LIMIT).await?;
        if dependents.is_empty() {
            break;
        }
        let locked = store.lock_jobs(&dependents, false).await?;
        let unfinished = unfinished_of(store, &unfinished).await?;
        let edges = store.edges(&unfinished, &dependents, true).await?;
        let mut rows: HashMap<i64, Counters> = locked.iter().map(|l| (l.id, Counters::of(l))).collect();
        let mut pairs: Vec<(i64, i64)> = Vec::new();
        let before = done.reopened;
        for edge in &edges {
            let Some(row) = rows.get_mut(&edge.job_id) else { continue };
            row.waiting_on += 1;
            if edge.outcome.is_some_and(|o| !edge.needs.met_by(o)) {
                row.failed_on -= 1;
            }
            pairs.push((edge.depends_on, edge.job_id));
            done.reopened += 1;
        }
        if done.reopened == before {
            break;
        }
        for chunk in pairs.chunks(IDS_PER_STATEMENT) {
            store.set_outcome(chunk, None, None).await?;
        }
        let mut next = Vec::new();
        let mut updates: BTreeMap<(i32, i32, Transition), Vec<i64>> = BTreeMap::new();
        for l in &locked {
            let row = &rows[&l.id];
            if !row.changed(l) {
                continue;
            }
            let revived = l.state == JobState::Cancelled
                && l.cancelled_by_dependency
                && l.on_failure == OnFailure::Cancel
                && l.failed_on > 0
                && row.failed_on <= 0;
            let waits = matches!(l.state, JobState::Available | JobState::Scheduled | JobState::Retryable);
            let transition = if revived || waits {
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
        // A fan-out wider than a round: the same jobs again (their re-opened edges no
        // longer count as settled), with the dependents brought back.
        if dependents.len() >= REOPEN_LIMIT {
            next.extend(&round);
        }
        round = next;
    }
    Ok(done)
}

/// Cancels again the jobs of `jobs` that a retry made `pending` in a workflow that
/// cancels on failure while a settled dependency still fails them (one not retried too).
async fn recancel<S: WorkflowStore + ?Sized>(
    store: &mut S,
    jobs: &[i64],
    now: Option<DateTime<Utc>>,
    done: &mut Reopened,
) -> Result<()> {
    let locked = store.lock_jobs(jobs, false).await?;
    let doomed: Vec<&Locked> = locked
        .iter()
        .filter(|l| l.state == JobState::Pending && l.failed_on > 0 && l.on_failure == OnFailure::Cancel)
        .collect();
    if doomed.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = doomed.iter().map(|l| l.id).collect();
    let edges = store.settled_edges_into(&ids).await?;
    // A failed dependency retried along with them (unfinished now) fails them no more:
    // the re-open that follows counts its edge as unsettled again.
    let depends_on: Vec<i64> = edges.iter().map(|e| e.depends_on).collect();
    let rerun = unfinished_of(store, &depends_on).await?;
    let mut failure: BTreeMap<i64, (i64, JobState)> = BTreeMap::new();
    for edge in edges.iter().filter(|e| rerun.binary_search(&e.depends_on).is_err()) {
        if let Some(outcome) = edge.outcome.filter(|o| !edge.needs.met_by(*o)) {
            let first = failure.entry(edge.job_id).or_insert((edge.depends_on, outcome));
            if edge.depends_on < first.0 {
                *first = (edge.depends_on, outcome);
            }
        }
    }
    let mut updates: BTreeMap<(i32, i32, Transition), Vec<i64>> = BTreeMap::new();
    for l in doomed {
        let Some(&(dependency, outcome)) = failure.get(&l.id) else { continue };
        done.recancelled.push(l.id);
        let transition = Transition::Cancel { dependency, outcome };
        updates.entry((l.waiting_on, l.failed_on, transition)).or_default().push(l.id);
    }
    apply(store, updates, now).await
}
