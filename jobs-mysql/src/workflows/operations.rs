//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use diesel_async::AsyncConnection;
use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{
    BatchChanged, InsertedWorkflow, JobBatchParams, JobInsertWorkflowParams, JobSettleParams, Result,
    Settled, WorkflowPruneParams, WorkflowPruned,
};

use super::MysqlStore;
use crate::driver::MysqlDriver;
use crate::exec::{in_transaction, on_connection};

impl MysqlDriver {
    /// See `JobInsertWorkflowParams`.
    pub(crate) async fn insert_workflow(
        &self,
        params: JobInsertWorkflowParams<'_>,
    ) -> Result<InsertedWorkflow> {
        in_transaction!(self, |tx| {
            let mut store = MysqlStore::new(tx);
            let inserted = workflow::insert_workflow(&mut store, params.workflow, params.now).await?;
            Ok((inserted, store.told))
        })
    }

    /// See `JobBatchParams`.
    pub(crate) async fn batch(&self, params: JobBatchParams<'_>) -> Result<BatchChanged> {
        in_transaction!(self, |tx| {
            let mut store = MysqlStore::new(tx);
            let changed = workflow::change_batch(&mut store, params.change, params.now).await?;
            Ok((changed, store.told))
        })
    }

    /// See `JobSettleParams`: the sweep's page, then a transaction per round. The driver's
    /// sessions run `READ COMMITTED` (`pool`), so that the rules' plain reads of the
    /// dependencies' states are current.
    pub(crate) async fn settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        let JobSettleParams { finished, after, limit, now } = params;
        let skip_locked = finished.is_some();
        let (first, next) = match finished {
            Some(ids) => (ids.to_vec(), None),
            None => {
                let page =
                    on_connection!(self, |c| MysqlStore::new(c).finished_with_unsettled(after, limit).await)?;
                (page.finished, page.next)
            }
        };
        let done = workflow::settle_cascade(first, |ids| async move {
            in_transaction!(self, |tx| {
                let mut store = MysqlStore::new(tx);
                let round = workflow::settle_round(&mut store, &ids, limit, now, skip_locked).await?;
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
        let (deleted, workflows) = in_transaction!(self, |tx| {
            let workflows = MysqlStore::new(&mut *tx).workflows_of(ids).await?;
            Ok(((super::delete_and_forget(tx, ids).await?, workflows), Vec::new()))
        })?;
        self.settle_eagerly(ids).await;
        workflow::forget_after_delete(&workflows, |w| self.delete_empty_workflows(w)).await;
        Ok(deleted)
    }

    /// See `WorkflowPruneParams`.
    pub(crate) async fn prune_workflows(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        in_transaction!(self, |tx| {
            Ok((workflow::prune_workflows(&mut MysqlStore::new(tx), params).await?, Vec::new()))
        })
    }

    /// Of `ids`, removes the workflows no member is left in, in a transaction of its own.
    async fn delete_empty_workflows(&self, ids: &[i64]) -> Result<usize> {
        in_transaction!(self, |tx| Ok((MysqlStore::new(tx).delete_empty_workflows(ids).await?, Vec::new())))
    }
}
