//! The driver's workflow operations (`Driver::job_insert_workflow`, `job_settle`, and the
//! eager settle after a cancel or a delete), each in transactions of its own.

use jobs_driver::workflow::{self, WorkflowStore};
use jobs_driver::{
    BatchChanged, InsertedWorkflow, JobBatchParams, JobInsertWorkflowParams, JobSettleParams, Result,
    Settled, WorkflowPruneParams, WorkflowPruned,
};

use super::PgStore;
use crate::driver::PgDriver;
use crate::op_conn::{on_conn, on_tx};

/// How long a sweep's settle waits for a row another transaction holds (an application's
/// that locked a dependent, say) before its page fails and is passed over
/// (`workflow::finish_page`); MariaDB's and MySQL's sessions wait as long. An eager settle
/// skips such rows instead.
const SWEEP_LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '5s'";

impl PgDriver {
    /// See `JobInsertWorkflowParams`.
    pub(crate) async fn insert_workflow(
        &self,
        params: JobInsertWorkflowParams<'_>,
    ) -> Result<InsertedWorkflow> {
        on_tx!(self, c => workflow::insert_workflow(&mut PgStore(c), params.workflow, params.now))
    }

    /// See `JobBatchParams`.
    pub(crate) async fn batch(&self, params: JobBatchParams<'_>) -> Result<BatchChanged> {
        on_tx!(self, c => workflow::change_batch(&mut PgStore(c), params.change, params.now))
    }

    /// See `JobSettleParams`: the sweep's page, then a transaction per round.
    pub(crate) async fn settle(&self, params: JobSettleParams<'_>) -> Result<Settled> {
        let JobSettleParams { finished, after, limit, now } = params;
        let skip_locked = finished.is_some();
        let (first, next) = match finished {
            Some(ids) => (ids.to_vec(), None),
            None => {
                let page = on_conn!(self, c => PgStore(c).finished_with_unsettled(after, limit))?;
                (page.finished, page.next)
            }
        };
        let done = workflow::settle_cascade(first, |ids| async move {
            on_tx!(self, c => async move {
                if !skip_locked {
                    diesel_async::RunQueryDsl::execute(diesel::sql_query(SWEEP_LOCK_TIMEOUT), &mut *c).await?;
                }
                workflow::settle_round(&mut PgStore(c), &ids, limit, now, skip_locked).await
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
        let (deleted, workflows) = on_tx!(self, c => async move {
            let workflows = PgStore(&mut *c).workflows_of(ids).await?;
            Ok((super::delete_and_forget(c, ids).await?, workflows))
        })?;
        self.settle_eagerly(ids).await;
        workflow::forget_after_delete(&workflows, |w| async move {
            on_tx!(self, c => PgStore(c).delete_empty_workflows(w))
        })
        .await;
        Ok(deleted)
    }

    /// See `WorkflowPruneParams`.
    pub(crate) async fn prune_workflows(&self, params: WorkflowPruneParams) -> Result<WorkflowPruned> {
        on_tx!(self, c => workflow::prune_workflows(&mut PgStore(c), params))
    }
}
