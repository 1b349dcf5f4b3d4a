//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use diesel_async::AsyncConnection;
use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{
    BatchChanged, DriverError, InsertedWorkflow, JobBatchParams, JobInsertWorkflowParams, JobSettleParams,
    Result, Settled, WorkflowPruneParams, WorkflowPruned,
};

use super::MysqlStore;
use crate::driver::MysqlDriver;

impl MysqlDriver {
    /// See `JobInsertWorkflowParams`.
    pub(crate) async fn insert_workflow(
        &self,
        params: JobInsertWorkflowParams<'_>,
    ) -> Result<InsertedWorkflow> {
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction::<_, DriverError, _>(async |tx| {
                let mut store = MysqlStore::new(tx);
                let inserted = workflow::insert_workflow(&mut store, params.workflow, params.now).await?;
                Ok((inserted, store.told))
            })
            .await;
        conn.give_back(&outcome);
        let (inserted, told) = outcome?;
        self.deliver(&told);
        Ok(inserted)
    }

    /// See `JobBatchParams`.
    pub(crate) async fn batch(&self, params: JobBatchParams<'_>) -> Result<BatchChanged> {
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction::<_, DriverError, _>(async |tx| {
                let mut store = MysqlStore::new(tx);
                let changed = workflow::change_batch(&mut store, params.change, params.now).await?;
                Ok((changed, store.told))
            })
            .await;
        conn.give_back(&outcome);
        let (changed, told) = outcome?;
        self.deliver(&told);
        Ok(changed)
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
                let mut conn = self.conn().await?;
                let found = MysqlStore::new(&mut *conn).finished_with_unsettled(after, limit).await;
                conn.give_back(&found);
                let page = found?;
                (page.finished, page.next)
            }
        };
        let done = workflow::settle_cascade(first, |ids| async move {
            let mut conn = self.conn().await?;
            let outcome = conn
                .transaction::<_, DriverError, _>(async |tx| {
                    let mut store = MysqlStore::new(tx);
                    let round = workflow::settle_round(&mut store, &ids, limit, now, skip_locked).await?;
                    Ok((round, store.told))
                })
                .await;
            conn.give_back(&outcome);
            let (round, told) = outcome?;
            self.deliver(&told);
            Ok(round)
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
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction::<_, DriverError, _>(async |tx| {
                let workflows = MysqlStore::new(&mut *tx).workflows_of(ids).await?;
                Ok((super::delete_and_forget(tx, ids).await?, workflows))
            })
            .await;
        conn.give_back(&outcome);
        let (deleted, workflows) = outcome?;
        self.settle_eagerly(ids).await;
        workflow::forget_after_delete(&workflows, |w| self.delete_empty_workflows(w)).await;
        Ok(deleted)
    }

    /// See `WorkflowPruneParams`.
    pub(crate) async fn prune_workflows(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction::<_, DriverError, _>(async |tx| {
                workflow::prune_workflows(&mut MysqlStore::new(tx), params).await
            })
            .await;
        conn.give_back(&outcome);
        outcome
    }

    /// Of `ids`, removes the workflows no member is left in, in a transaction of its own.
    async fn delete_empty_workflows(&self, ids: &[i64]) -> Result<usize> {
        let mut conn = self.conn().await?;
        let outcome = conn
            .transaction::<_, DriverError, _>(async |tx| {
                MysqlStore::new(tx).delete_empty_workflows(ids).await
            })
            .await;
        conn.give_back(&outcome);
        outcome
    }
}
