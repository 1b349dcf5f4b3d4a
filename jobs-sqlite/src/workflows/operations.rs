//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{
    BatchChanged, DriverError, InsertedWorkflow, JobBatchParams, JobInsertWorkflowParams, JobSettleParams,
    Result, Settled, WorkflowPruneParams, WorkflowPruned,
};

use super::SqliteStore;
use crate::driver::SqliteDriver;
use crate::exec::in_transaction;
use crate::time::now_ms;

impl SqliteDriver {
    /// See `JobInsertWorkflowParams`.
    pub(crate) async fn insert_workflow(
        &self,
        params: JobInsertWorkflowParams<'_>,
    ) -> Result<InsertedWorkflow> {
        let now = now_ms(params.now);
        in_transaction!(self, |c| {
            let mut store = SqliteStore::new(c, now);
            let inserted = workflow::insert_workflow(&mut store, params.workflow, params.now).await?;
            Ok((inserted, store.told))
        })
    }

    /// See `JobBatchParams`.
    pub(crate) async fn batch(&self, params: JobBatchParams<'_>) -> Result<BatchChanged> {
        let now = now_ms(params.now);
        in_transaction!(self, |c| {
            let mut store = SqliteStore::new(c, now);
            let changed = workflow::change_batch(&mut store, params.change, params.now).await?;
            Ok((changed, store.told))
        })
    }

    /// See `JobSettleParams`: a transaction for the sweep's page, one per round.
    pub(crate) async fn settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        let JobSettleParams { finished, after, limit, now } = params;
        let (first, next) = match finished {
            Some(ids) => (ids.to_vec(), None),
            None => {
                let page = in_transaction!(self, |c| {
                    Ok((
                        SqliteStore::new(c, now_ms(now)).finished_with_unsettled(after, limit).await?,
                        Vec::new(),
                    ))
                })?;
                (page.finished, page.next)
            }
        };
        let done = workflow::settle_cascade(first, |ids| async move {
            in_transaction!(self, |c| {
                let mut store = SqliteStore::new(c, now_ms(now));
                let round = workflow::settle_round(&mut store, &ids, limit, now, false).await?;
                Ok((round, store.told))
            })
        })
        .await;
        workflow::finish_page(done, next, finished.is_none())
    }

    /// Settles the edges out of `ids`, which a person just cancelled or deleted (and
    /// committed): a failure is logged, and left to the settler's sweep.
    pub(crate) async fn settle_eagerly(&self, ids: &[i64]) {
        workflow::settle_after_control(ids, |params| self.settle(params)).await;
    }

    /// Deletes the jobs of `ids` that are not running, and the edges into them; after the
    /// commit, settles the edges out of them and removes the workflows they emptied.
    pub(crate) async fn delete(&self, ids: &[i64]) -> Result<i64> {
        let (deleted, workflows) = in_transaction!(self, |c| {
            let workflows = SqliteStore::new(&mut *c, now_ms(None)).workflows_of(ids).await?;
            Ok(((super::delete_and_forget(c, ids).await?, workflows), Vec::new()))
        })?;
        self.settle_eagerly(ids).await;
        workflow::forget_after_delete(&workflows, |w| async move {
            in_transaction!(self, |c| Ok((
                SqliteStore::new(c, now_ms(None)).delete_empty_workflows(w).await?,
                Vec::new()
            )))
        })
        .await;
        Ok(deleted)
    }

    /// See `WorkflowPruneParams`.
    pub(crate) async fn prune_workflows(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        in_transaction!(self, |c| {
            Ok((workflow::prune_workflows(&mut SqliteStore::new(c, now_ms(None)), params).await?, Vec::new()))
        })
    }
}
