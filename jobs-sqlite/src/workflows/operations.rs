//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{DriverError, InsertedWorkflow, JobInsertWorkflowParams, JobSettleParams, Result, Settled};

use super::SqliteStore;
use crate::driver::SqliteDriver;
use crate::exec::in_transaction;
use crate::time::now_ms;

/// The most dependents a cancel's or a delete's eager settle takes per transaction.
const EAGER_SETTLE_LIMIT: usize = 1_000;

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

    /// See `JobSettleParams`: a transaction for the sweep, one per round.
    pub(crate) async fn settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        let JobSettleParams { finished, limit, now } = params;
        let first = match finished {
            Some(ids) => ids.to_vec(),
            None => in_transaction!(self, |c| {
                Ok((SqliteStore::new(c, now_ms(now)).finished_with_unsettled(limit).await?, Vec::new()))
            })?,
        };
        workflow::settle_cascade(first, |ids| async move {
            in_transaction!(self, |c| {
                let mut store = SqliteStore::new(c, now_ms(now));
                let round = workflow::settle_round(&mut store, &ids, limit, now).await?;
                Ok((round, store.told))
            })
        })
        .await
    }

    /// Settles the edges out of `ids`, which a person just cancelled or deleted.
    pub(crate) async fn settle_eagerly(&self, ids: &[i64]) -> Result<Settled> {
        self.settle(JobSettleParams { finished: Some(ids), limit: EAGER_SETTLE_LIMIT, now: None }).await
    }
}
