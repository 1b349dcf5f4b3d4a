//! The pruner's statements: finished jobs past their retention go, their own dependency
//! edges with them (the workflows they emptied go with the pruner's sweep of workflows,
//! `Driver::workflow_prune`).

use diesel::sql_types::{BigInt, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::rows::Id;
use jobs_driver::{JobPruneParams, Result};

use crate::cached::CachedQuery;
use crate::time::{millis, now_ms};

const PRUNE: &str = "\
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE state = $1 AND finalized_at IS NOT NULL AND finalized_at < $2
    ORDER BY finalized_at
    LIMIT $3
)
RETURNING id";

/// A pruned job's own dependencies go with it (their copied results were its to read);
/// its dependents keep theirs on it, settled, until they go.
const PRUNE_EDGES: &str = "DELETE FROM job_dependencies WHERE job_id IN (SELECT value FROM json_each($1))";

/// See [`JobPruneParams`].
pub(crate) fn prune(conn: &mut SqliteConnection, params: &JobPruneParams) -> Result<i64> {
    let cutoff = now_ms(params.now).saturating_sub(millis(params.retention));
    let gone: Vec<Id> = CachedQuery::new(PRUNE)
        .bind::<Text, _>(params.state.as_str())
        .bind::<BigInt, _>(cutoff)
        .bind::<BigInt, _>(params.limit)
        .load(conn)?;
    let ids: Vec<i64> = gone.iter().map(|r| r.id).collect();
    if !ids.is_empty() {
        CachedQuery::new(PRUNE_EDGES).bind::<Text, _>(super::read::ids_json(&ids)).execute(conn)?;
    }
    Ok(ids.len() as i64)
}
