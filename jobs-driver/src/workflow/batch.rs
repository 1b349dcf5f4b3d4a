//! Batches: a group of jobs, added at once or over time, and a callback job that runs
//! once, when the batch is sealed and every member has finished, whatever each member's
//! end (`docs/design/workflows.md`, "Data model").
//!
//! A batch is a workflow whose callback depends on every member with
//! [`Needs::Finished`], and counts one more unsettled dependency than its edges until the
//! batch is sealed: the seal. An add locks the workflow's row and refuses a sealed batch;
//! the seal takes the one off once. So the callback is released by exactly one
//! transaction: the one that brings its counters to zero, under its lock.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::definition::{Needs, OnFailure};
use super::store::{Edge, JobUpdate, Transition, WorkflowStore};
use crate::error::WorkflowError;
use crate::error::{DriverError, Result};
use crate::job::{Inserted, NewJob};
use crate::validation::{MAX_WORKFLOW_NAME, MAX_WORKFLOW_STEPS};

/// Which batch a [`BatchChange`] changes.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchTarget {
    /// A new batch named `name` (for people), with its callback.
    New {
        /// The batch's name.
        name: String,
        /// The job that runs once every member has finished (after the seal).
        callback: Box<NewJob>,
    },
    /// An existing batch: the id a [`BatchChanged`] returned.
    Existing(i64),
}

/// Opening a batch, adding members to one, sealing it, or several at once, in one
/// transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchChange {
    /// The batch.
    pub target: BatchTarget,
    /// Members to add (none: only the other changes). A member whose uniqueness key is
    /// held joins as the job that holds it.
    pub members: Vec<NewJob>,
    /// Seal it: no member may join after this, and the callback runs once every member
    /// has finished. Sealing a sealed batch does nothing.
    pub seal: bool,
}

impl BatchChange {
    /// Checks it before anything is written.
    pub fn validate(&self) -> Result<(), WorkflowError> {
        if self.members.len() > MAX_WORKFLOW_STEPS {
            return Err(WorkflowError::TooManySteps(self.members.len()));
        }
        if let BatchTarget::New { name, callback } = &self.target {
            let chars = name.chars().count();
            if chars == 0 || chars > MAX_WORKFLOW_NAME {
                return Err(WorkflowError::Name(name.chars().take(MAX_WORKFLOW_NAME + 1).collect()));
            }
            callback.validate().map_err(|error| WorkflowError::Job { step: 0, error })?;
            if callback.unique.is_some() {
                return Err(WorkflowError::UniqueCallback);
            }
        }
        for (i, job) in self.members.iter().enumerate() {
            job.validate().map_err(|error| WorkflowError::Job { step: i, error })?;
        }
        Ok(())
    }
}

/// What a [`BatchChange`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchChanged {
    /// The batch (its workflow's id).
    pub batch_id: i64,
    /// Its callback job.
    pub callback_id: i64,
    /// Each member added, in order.
    pub members: Vec<Inserted>,
    /// The change released the callback (sealed, and every member had finished).
    pub released: bool,
}

/// Applies `change` through `store`, in the store's transaction: opens the batch (its
/// row, its callback `pending` on the seal), or locks an existing one's row (refusing a
/// sealed one new members); inserts the members through the ordinary insert, each with an
/// edge into the callback (settled at once for a member already finished: a held key's
/// job); counts them on the callback, under its lock; seals; releases the callback when
/// nothing is left to wait for.
pub async fn change_batch<S: WorkflowStore + ?Sized>(
    store: &mut S,
    change: &BatchChange,
    now: Option<DateTime<Utc>>,
) -> Result<BatchChanged> {
    change.validate()?;
    let (batch_id, callback_id, sealed) = match &change.target {
        BatchTarget::New { name, callback } => {
            let batch_id = store.insert_workflow_row(name, OnFailure::Hold).await?;
            let inserted = store.insert_jobs(std::slice::from_ref(&**callback)).await?;
            let callback_id =
                inserted.first().map(|i| i.id).ok_or_else(|| DriverError::unexpected("no callback"))?;
            let seal = JobUpdate {
                ids: vec![callback_id],
                waiting_on: 1,
                failed_on: 0,
                workflow_id: Some(batch_id),
                transition: Transition::Pend,
                now,
            };
            store.update_jobs(&seal).await?;
            store.set_batch(batch_id, callback_id, false).await?;
            (batch_id, callback_id, false)
        }
        BatchTarget::Existing(id) => {
            let row = store.lock_workflow(*id).await?.ok_or(WorkflowError::UnknownBatch(*id))?;
            let callback_id = row.callback_id.ok_or(WorkflowError::UnknownBatch(*id))?;
            if row.sealed && !change.members.is_empty() {
                return Err(WorkflowError::BatchSealed(*id).into());
            }
            (*id, callback_id, row.sealed)
        }
    };

    let members = store.insert_jobs(&change.members).await?;
    if members.len() != change.members.len() {
        return Err(DriverError::unexpected(format!(
            "{} members inserted of {}",
            members.len(),
            change.members.len()
        )));
    }
    let fresh: Vec<i64> = members.iter().filter(|m| !m.existing).map(|m| m.id).collect();
    for chunk in fresh.chunks(super::plan::IDS_PER_STATEMENT) {
        let join = JobUpdate {
            ids: chunk.to_vec(),
            waiting_on: 0,
            failed_on: 0,
            workflow_id: Some(batch_id),
            transition: Transition::Keep,
            now,
        };
        store.update_jobs(&join).await?;
    }
    // A member whose key was held is that job, locked as a dependency: it may be finished
    // (a retry of it waits for this), running (a success on a delete-on-completion queue
    // keeps it for the callback's counts), or in the batch already (no second edge).
    let ids: BTreeSet<i64> = members.iter().map(|m| m.id).collect();
    let mut held: Vec<i64> = members.iter().filter(|m| m.existing).map(|m| m.id).collect();
    held.sort_unstable();
    held.dedup();
    let finished: BTreeMap<i64, crate::state::JobState> = super::plan::hold_dependencies(store, &held)
        .await?
        .into_values()
        .filter(|s| s.state.is_final())
        .map(|s| (s.id, s.state))
        .collect();
    let ids: Vec<i64> = ids.into_iter().collect();
    let locked = store.lock_jobs(&[callback_id], false).await?;
    let callback = locked.first().ok_or(WorkflowError::UnknownBatch(batch_id))?;
    let mut already: BTreeSet<i64> = BTreeSet::new();
    if !held.is_empty() {
        for settled in [false, true] {
            already.extend(store.edges(&held, &[callback_id], settled).await?.iter().map(|e| e.depends_on));
        }
    }
    let kinds: BTreeMap<i64, &str> =
        members.iter().zip(&change.members).map(|(m, j)| (m.id, j.kind.as_ref())).collect();
    let edges: Vec<Edge> = ids
        .iter()
        .filter(|id| !already.contains(id))
        .map(|id| Edge {
            depends_on: *id,
            job_id: callback_id,
            kind: kinds.get(id).copied().unwrap_or_default().to_owned(),
            needs: Needs::Finished,
            outcome: finished.get(id).copied(),
            result: None,
        })
        .collect();
    for chunk in edges.chunks(super::plan::EDGES_PER_STATEMENT) {
        store.insert_edges(chunk).await?;
    }
    let added = i32::try_from(edges.iter().filter(|e| e.outcome.is_none()).count()).unwrap_or(i32::MAX);
    let mut waiting_on = callback.waiting_on.saturating_add(added);
    if change.seal && !sealed {
        store.set_batch(batch_id, callback_id, true).await?;
        waiting_on -= 1;
    }
    let released =
        callback.state == crate::state::JobState::Pending && waiting_on <= 0 && callback.failed_on <= 0;
    let update = JobUpdate {
        ids: vec![callback_id],
        waiting_on: waiting_on.max(0),
        failed_on: callback.failed_on,
        workflow_id: None,
        transition: if released { Transition::Release } else { Transition::Keep },
        now,
    };
    store.update_jobs(&update).await?;
    Ok(BatchChanged { batch_id, callback_id, members, released })
}
