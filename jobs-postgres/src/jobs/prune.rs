//! The pruner's statement: finished jobs past their retention go, from the jobs table and
//! the archive, their own dependency edges with them, and the workflows they emptied;
//! and the statements that remove the workflows a person's delete emptied.

use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobPruneParams, Result};

use crate::rows::{Count, millis};

// Oldest first, in the archive and among the finished jobs still in `jobs` (those that
// hold their uniqueness key, and those the archiver has not moved yet).
macro_rules! prune_from {
    ($table:literal) => {
        concat!(
            "doomed_",
            $table,
            " AS (
    SELECT id FROM ",
            $table,
            ", clock
    WHERE state = $1::job_state AND finalized_at < clock.cutoff
    ORDER BY finalized_at
    LIMIT $4
    FOR UPDATE OF ",
            $table,
            " SKIP LOCKED
), gone_",
            $table,
            " AS (
    DELETE FROM ",
            $table,
            " USING doomed_",
            $table,
            " AS d WHERE ",
            $table,
            ".id = d.id RETURNING ",
            $table,
            ".id, ",
            $table,
            ".workflow_id
)"
        )
    };
}

const PRUNE: &str = concat!(
    "WITH clock AS (SELECT COALESCE($3::timestamptz, now()) - $2 * interval '1 millisecond' AS cutoff),\n",
    prune_from!("jobs_archive"),
    ",\n",
    prune_from!("jobs"),
    // A pruned job's own dependencies go with it (their copied results were its to read);
    // its dependents keep theirs on it, settled, until they go.
    ",
edges AS (
    DELETE FROM job_dependencies
    WHERE job_id IN (SELECT id FROM gone_jobs_archive UNION ALL SELECT id FROM gone_jobs)
),
-- A workflow goes with its last member (the statement's snapshot still sees the members
-- it deletes: they are left out by id). A batch that may still take members (unsealed)
-- stays: an add committed after this statement's snapshot would be missed. A row another
-- transaction holds is left for a later prune.
workflows AS (
    DELETE FROM job_workflows w
    WHERE w.id IN (SELECT id FROM job_workflows
                   WHERE id IN (SELECT workflow_id FROM gone_jobs_archive UNION SELECT workflow_id FROM gone_jobs)
                     AND (callback_id IS NULL OR sealed_at IS NOT NULL)
                   FOR UPDATE SKIP LOCKED)
      AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.workflow_id = w.id
                                             AND j.id NOT IN (SELECT id FROM gone_jobs))
      AND NOT EXISTS (SELECT 1 FROM jobs_archive a WHERE a.workflow_id = w.id
                                                     AND a.id NOT IN (SELECT id FROM gone_jobs_archive))
)
SELECT (SELECT count(*) FROM gone_jobs_archive) + (SELECT count(*) FROM gone_jobs) AS n"
);

/// Of the workflows `$1`, deletes those no member is left in, after a person's delete (the
/// prune's is in `PRUNE`, alike): never a batch that may still take members (unsealed),
/// nor a row another transaction holds.
pub(crate) const DELETE_EMPTY_WORKFLOWS: &str = "\
DELETE FROM job_workflows w
WHERE w.id IN (SELECT id FROM job_workflows
               WHERE id = ANY ($1) AND (callback_id IS NULL OR sealed_at IS NOT NULL)
               FOR UPDATE SKIP LOCKED)
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.workflow_id = w.id)
  AND NOT EXISTS (SELECT 1 FROM jobs_archive a WHERE a.workflow_id = w.id)";

/// The workflows of the jobs `$1`: before a delete, those it may empty.
pub(crate) const WORKFLOWS_OF: &str =
    "SELECT DISTINCT workflow_id AS id FROM jobs_all WHERE id = ANY ($1) AND workflow_id IS NOT NULL";

/// See [`JobPruneParams`].
pub(crate) async fn prune<C>(conn: &mut C, params: JobPruneParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Count = diesel::sql_query(PRUNE)
        .bind::<Text, _>(params.state.as_str())
        .bind::<BigInt, _>(millis(params.retention))
        .bind::<Nullable<Timestamptz>, _>(params.now)
        .bind::<BigInt, _>(params.limit)
        .get_result(conn)
        .await?;
    Ok(row.n)
}
