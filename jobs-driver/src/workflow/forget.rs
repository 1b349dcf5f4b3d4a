//! The end of a workflow's row (`job_workflows`): it lives as long as any of its members
//! and goes after the last, by the pruner's sweep ([`prune_workflows`]) or, at once, after
//! a person's delete through the driver ([`forget_after_delete`]). Both run on the
//! driver's own connection, after the jobs went and committed, so a row is never removed
//! while an application's transaction can still see a member, and the removal never holds
//! a job's lock while it waits for a workflow's.

use std::future::Future;

use super::params::{WorkflowPruneParams, WorkflowPruned};
use super::store::WorkflowStore;
use crate::error::Result;

/// A page of the sweep (see [`WorkflowPruneParams`]), in the store's transaction.
pub async fn prune_workflows<S: WorkflowStore + ?Sized>(
    store: &mut S,
    params: WorkflowPruneParams,
) -> Result<WorkflowPruned> {
    let limit = params.limit.max(1);
    let page = store.workflows_after(params.after, limit).await?;
    let deleted = if page.is_empty() { 0 } else { store.delete_empty_workflows(&page).await? };
    let next = if page.len() >= limit { page.last().copied() } else { None };
    Ok(WorkflowPruned { deleted, next })
}

/// Deletes, through `forget` (the driver's transaction around
/// [`WorkflowStore::delete_empty_workflows`]), the rows of `workflows` that a person's
/// delete (committed) emptied: a failure is logged, and left to the pruner's sweep (the
/// delete itself stands).
pub async fn forget_after_delete<'a, F, Fut>(workflows: &'a [i64], forget: F)
where
    F: FnOnce(&'a [i64]) -> Fut,
    Fut: Future<Output = Result<usize>>,
{
    if workflows.is_empty() {
        return;
    }
    if let Err(e) = forget(workflows).await {
        tracing::warn!(error = %e, "removing the workflows a delete emptied failed: the pruner will");
    }
}
