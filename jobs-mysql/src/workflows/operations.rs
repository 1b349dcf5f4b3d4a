//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use diesel_async::AsyncConnection;
use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{
    BatchChanged, DriverError, InsertedWorkflow, JobBatchParams, JobInsertWorkflowParams, JobSettleParams,
    Result, Settled,
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
}
