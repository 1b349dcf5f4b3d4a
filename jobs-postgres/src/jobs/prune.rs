//! The pruner's statement: finished jobs past their retention go, from the jobs table and
//! the archive, their own dependency edges with them (the workflows they emptied go with
//! the pruner's sweep of workflows, `Driver::workflow_prune`).

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
)
SELECT (SELECT count(*) FROM gone_jobs_archive) + (SELECT count(*) FROM gone_jobs) AS n"
);

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
