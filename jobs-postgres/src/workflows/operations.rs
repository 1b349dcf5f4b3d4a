//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{InsertedWorkflow, JobInsertWorkflowParams, JobSettleParams, Result, Settled};

use super::PgStore;
use crate::driver::PgDriver;
use crate::op_conn::{on_conn, on_tx};

/// The most dependents a cancel's or a delete's eager settle takes per transaction.
const EAGER_SETTLE_LIMIT: usize = 1_000;

impl PgDriver {
    /// See `JobInsertWorkflowParams`.
    pub(crate) async fn insert_workflow(
        &self,
        params: JobInsertWorkflowParams<'_>,
    ) -> Result<InsertedWorkflow> {
        on_tx!(self, c => workflow::insert_workflow(&mut PgStore(c), params.workflow, params.now))
    }

    /// See `JobSettleParams`: the sweep's read, then a transaction per round.
    pub(crate) async fn settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        let JobSettleParams { finished, limit, now } = params;
        let first = match finished {
            Some(ids) => ids.to_vec(),
            None => on_conn!(self, c => PgStore(c).finished_with_unsettled(limit))?,
        };
        workflow::settle_cascade(first, |ids| async move {
            on_tx!(self, c => workflow::settle_round(&mut PgStore(c), &ids, limit, now))
        })
        .await
    }

    /// Settles the edges out of `ids`, which a person just cancelled or deleted.
    pub(crate) async fn settle_eagerly(&self, ids: &[i64]) -> Result<Settled> {
        self.settle(JobSettleParams { finished: Some(ids), limit: EAGER_SETTLE_LIMIT, now: None }).await
    }
}
