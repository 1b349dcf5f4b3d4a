//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use diesel_async::AsyncConnection;
use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{DriverError, InsertedWorkflow, JobInsertWorkflowParams, JobSettleParams, Result, Settled};

use super::MysqlStore;
use crate::driver::MysqlDriver;

/// The most dependents a cancel's or a delete's eager settle takes per transaction.
const EAGER_SETTLE_LIMIT: usize = 1_000;

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

    /// See `JobSettleParams`: the sweep's read, then a transaction per round. The driver's
    /// sessions run `READ COMMITTED` (`pool`), so the rules' plain reads of the
    /// dependencies' states, after their locks, see what committed meanwhile.
    pub(crate) async fn settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        let JobSettleParams { finished, limit, now } = params;
        let first = match finished {
            Some(ids) => ids.to_vec(),
            None => {
                let mut conn = self.conn().await?;
                let found = MysqlStore::new(&mut *conn).finished_with_unsettled(limit).await;
                conn.give_back(&found);
                found?
            }
        };
        workflow::settle_cascade(first, |ids| async move {
            let mut conn = self.conn().await?;
            let outcome = conn
                .transaction::<_, DriverError, _>(async |tx| {
                    let mut store = MysqlStore::new(tx);
                    let round = workflow::settle_round(&mut store, &ids, limit, now).await?;
                    Ok((round, store.told))
                })
                .await;
            conn.give_back(&outcome);
            let (round, told) = outcome?;
            self.deliver(&told);
            Ok(round)
        })
        .await
    }

    /// Settles the edges out of `ids`, which a person just cancelled or deleted.
    pub(crate) async fn settle_eagerly(&self, ids: &[i64]) -> Result<Settled> {
        self.settle(JobSettleParams { finished: Some(ids), limit: EAGER_SETTLE_LIMIT, now: None }).await
    }
}
