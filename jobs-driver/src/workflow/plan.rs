//! Inserting a workflow: the rules of `docs/design/workflows.md`, "Inserting".

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use super::definition::{DependsOn, InsertedWorkflow, Needs, NewWorkflow, OnFailure};
use super::store::{DependencyState, Edge, JobUpdate, Transition, WorkflowStore};
use crate::error::WorkflowError;
use crate::error::{DriverError, Result};
use crate::state::JobState;

/// Inserts `workflow` through `store`, in the store's transaction: the workflow's row,
/// the steps through the ordinary insert, an edge per dependency (settled at once for a
/// dependency already finished), and each new step's counters, state and workflow.
///
/// A step with unfinished dependencies is `pending`; one whose dependency already failed
/// it is `pending` too (`Hold`) or `cancelled` (`Cancel`, and its dependents in the
/// workflow in turn). An existing job named as a dependency must exist
/// ([`WorkflowError::UnknownDependency`], found before anything is written). Each is
/// locked and read again (`hold_dependencies`): a completion of an unfinished one waits
/// for the caller's transaction, and a success on a delete-on-completion queue then keeps
/// it, so that the step reads that it completed (gone, it would read as cancelled); a
/// retry of a finished one waits for this to commit and re-opens the edge settled here.
pub async fn insert_workflow<S: WorkflowStore + ?Sized>(
    store: &mut S,
    workflow: &NewWorkflow,
    now: Option<DateTime<Utc>>,
) -> Result<InsertedWorkflow> {
    workflow.validate()?;
    let mut external: Vec<i64> = workflow
        .steps
        .iter()
        .flat_map(|s| &s.after)
        .filter_map(|d| match d {
            DependsOn::Job(id) => Some(*id),
            DependsOn::Step(_) => None,
        })
        .collect();
    external.sort_unstable();
    external.dedup();
    // Read first, unlocked, so that no lock falls on an id that does not exist (on MySQL,
    // a gap lock that would stop every insert); then the ones found are locked and read
    // again, before anything is written: an unknown one is refused with nothing written.
    let found: Vec<i64> = store.dependency_states(&external).await?.into_iter().map(|s| s.id).collect();
    if let Some(missing) = external.iter().find(|id| !found.contains(id)) {
        return Err(WorkflowError::UnknownDependency(*missing).into());
    }
    let mut known = hold_dependencies(store, &found).await?;
    if let Some(gone) = external.iter().find(|id| !known.contains_key(id)) {
        // Gone since the read (marks may be written: roll the transaction back).
        return Err(WorkflowError::UnknownDependency(*gone).into());
    }

    let workflow_id = store.insert_workflow_row(&workflow.name, workflow.on_failure).await?;
    let jobs: Vec<_> = workflow.steps.iter().map(|s| s.job.clone()).collect();
    let inserted = store.insert_jobs(&jobs).await?;
    if inserted.len() != jobs.len() {
        return Err(DriverError::unexpected(format!("{} jobs inserted of {}", inserted.len(), jobs.len())));
    }
    // A step whose key was held is that job: the steps after it depend on it as on an
    // existing job, locked the same way (after the others: a rare case, see the design
    // note). It was found by the insert, in this transaction; gone since, the insert fails
    // after its writes (roll the transaction back).
    let mut deduplicated: Vec<i64> = workflow
        .steps
        .iter()
        .flat_map(|s| &s.after)
        .filter_map(|d| match d {
            DependsOn::Step(i) if inserted[*i].existing && !known.contains_key(&inserted[*i].id) => {
                Some(inserted[*i].id)
            }
            _ => None,
        })
        .collect();
    deduplicated.sort_unstable();
    deduplicated.dedup();
    let held = hold_dependencies(store, &deduplicated).await?;
    if let Some(gone) = deduplicated.iter().find(|id| !held.contains_key(id)) {
        return Err(WorkflowError::UnknownDependency(*gone).into());
    }
    known.extend(held);

    // Each step's fate, in step order (a step names only earlier ones).
    let mut cancelled_here: HashMap<i64, (i64, JobState)> = HashMap::new();
    let mut edges = Vec::new();
    let mut updates: BTreeMap<(i32, i32, Transition), Vec<i64>> = BTreeMap::new();
    for (step, row) in workflow.steps.iter().zip(&inserted) {
        if row.existing {
            continue;
        }
        let mut on: Vec<(i64, &str)> = step
            .after
            .iter()
            .map(|d| match *d {
                DependsOn::Step(i) => (inserted[i].id, workflow.steps[i].job.kind.as_ref()),
                DependsOn::Job(id) => (id, known.get(&id).map_or("", |s| s.kind.as_str())),
            })
            .collect();
        on.sort_unstable();
        on.dedup_by_key(|(id, _)| *id);
        let (mut waiting, mut failed, mut first_failure) = (0, 0, None);
        for (dep, kind) in on {
            let outcome = match cancelled_here.get(&dep) {
                Some(_) => Some(JobState::Cancelled),
                None => known.get(&dep).map(|s| s.state).filter(|s| s.is_final()),
            };
            let result = match outcome {
                Some(JobState::Completed) if step.needs == Needs::Completed => {
                    known.get(&dep).and_then(|s| s.result.clone())
                }
                _ => None,
            };
            match outcome {
                None => waiting += 1,
                Some(o) if !step.needs.met_by(o) => {
                    failed += 1;
                    first_failure.get_or_insert((dep, o));
                }
                Some(_) => {}
            }
            edges.push(Edge {
                depends_on: dep,
                job_id: row.id,
                kind: kind.to_owned(),
                needs: step.needs,
                outcome,
                result,
            });
        }
        let transition = match first_failure {
            Some((dependency, outcome)) if workflow.on_failure == OnFailure::Cancel => {
                cancelled_here.insert(row.id, (dependency, outcome));
                Transition::Cancel { dependency, outcome }
            }
            _ if waiting > 0 || failed > 0 => Transition::Pend,
            _ => Transition::Keep,
        };
        updates.entry((waiting, failed, transition)).or_default().push(row.id);
    }

    for batch in edge_batches(&edges) {
        store.insert_edges(batch).await?;
    }
    for ((waiting_on, failed_on, transition), ids) in updates {
        for chunk in ids.chunks(IDS_PER_STATEMENT) {
            let update = JobUpdate {
                ids: chunk.to_vec(),
                waiting_on,
                failed_on,
                workflow_id: Some(workflow_id),
                transition,
                now,
            };
            store.update_jobs(&update).await?;
        }
    }
    Ok(InsertedWorkflow { id: workflow_id, jobs: inserted })
}

/// The most edges one `insert_edges` call takes (five values each: within every
/// backend's limit on bound parameters).
pub(crate) const EDGES_PER_STATEMENT: usize = 1_000;

/// The most bytes of copied results one `insert_edges` call carries (well within
/// MariaDB's default `max_allowed_packet` of 16 MiB, whatever the fan-out).
pub(crate) const EDGE_RESULT_BYTES_PER_STATEMENT: usize = 1 << 20;

/// `edges` in batches of at most [`EDGES_PER_STATEMENT`] edges and, past the first edge
/// of a batch, [`EDGE_RESULT_BYTES_PER_STATEMENT`] bytes of results.
fn edge_batches(edges: &[Edge]) -> Vec<&[Edge]> {
    let mut batches = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, edge) in edges.iter().enumerate() {
        let size = edge.result.as_ref().map_or(0, |r| r.to_string().len());
        if i > start && (i - start >= EDGES_PER_STATEMENT || bytes + size > EDGE_RESULT_BYTES_PER_STATEMENT) {
            batches.push(&edges[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < edges.len() {
        batches.push(&edges[start..]);
    }
    batches
}

/// The most ids one statement takes.
pub(crate) const IDS_PER_STATEMENT: usize = 5_000;

fn states_by_id(states: Vec<DependencyState>) -> HashMap<i64, DependencyState> {
    states.into_iter().map(|s| (s.id, s)).collect()
}

impl PartialOrd for Transition {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Transition {
    /// Any fixed order: updates are grouped by transition.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |t: &Transition| match *t {
            Transition::Keep => (0, 0, 0),
            Transition::Pend => (1, 0, 0),
            Transition::Release => (2, 0, 0),
            Transition::Cancel { dependency, outcome } => (3, dependency, outcome as i64),
        };
        key(self).cmp(&key(other))
    }
}

/// Locks the existing jobs `ids` (ascending) as dependencies and reads their states,
/// current: those in the live table in one statement in id order, the unfinished ones
/// marked ([`WorkflowStore::mark_dependencies`]: a completion of one waits for this
/// transaction, and keeps it; a retry of one waits too), then those in Postgres's archive
/// (finished) share-locked. A job left out is gone.
pub(super) async fn hold_dependencies<S: WorkflowStore + ?Sized>(
    store: &mut S,
    ids: &[i64],
) -> Result<HashMap<i64, DependencyState>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let mut held = states_by_id(store.mark_dependencies(ids).await?);
    let rest: Vec<i64> = ids.iter().copied().filter(|id| !held.contains_key(id)).collect();
    if !rest.is_empty() {
        let archived = store.lock_dependencies(&rest, false).await?;
        // Back from the archive meanwhile (a retry), and unfinished: marked where it went
        // (a late lock; rare).
        let back: Vec<i64> = archived.iter().filter(|s| !s.state.is_final()).map(|s| s.id).collect();
        held.extend(states_by_id(archived));
        if !back.is_empty() {
            held.extend(states_by_id(store.mark_dependencies(&back).await?));
        }
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(result: Option<serde_json::Value>) -> Edge {
        Edge { depends_on: 1, job_id: 2, kind: "k".into(), needs: Needs::Completed, outcome: None, result }
    }

    #[test]
    fn edge_batches_are_bounded_by_count_and_by_the_bytes_of_results() {
        let plain: Vec<Edge> = (0..2_500).map(|_| edge(None)).collect();
        let sizes: Vec<usize> = edge_batches(&plain).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [1_000, 1_000, 500]);

        // 100 KiB results: ten fit under a MiB, and a result bigger than the bound still
        // goes, alone.
        let big = serde_json::Value::String("x".repeat(100 * 1024));
        let heavy: Vec<Edge> = (0..25).map(|_| edge(Some(big.clone()))).collect();
        let sizes: Vec<usize> = edge_batches(&heavy).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [10, 10, 5]);
        let huge = serde_json::Value::String("x".repeat(2 << 20));
        let sizes: Vec<usize> =
            edge_batches(&[edge(Some(huge.clone())), edge(Some(huge))]).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [1, 1]);
        assert!(edge_batches(&[]).is_empty());
    }
}
