//! The pruner's statements: finished jobs past their retention go, their own dependency
//! edges with them, and the workflows they emptied (also after a person's delete).

use diesel::sql_types::{BigInt, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::rows::Member;
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
RETURNING id, workflow_id";

/// A pruned job's own dependencies go with it (their copied results were its to read);
/// its dependents keep theirs on it, settled, until they go.
const PRUNE_EDGES: &str = "DELETE FROM job_dependencies WHERE job_id IN (SELECT value FROM json_each($1))";

/// Of the workflows `$1` (a JSON array of ids), deletes those no member is left in (after a
/// prune or a person's delete), but a batch that may still take members (unsealed), as on
/// every backend.
pub(crate) const DELETE_EMPTY_WORKFLOWS: &str = "\
DELETE FROM job_workflows WHERE id IN (SELECT value FROM json_each($1))
  AND (callback_id IS NULL OR sealed_at IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.workflow_id = job_workflows.id)";

/// The workflows of the jobs `$1` (a JSON array of ids): before a delete, those it may
/// empty.
pub(crate) const WORKFLOWS_OF: &str = "SELECT DISTINCT workflow_id AS id FROM jobs \
     WHERE id IN (SELECT value FROM json_each($1)) AND workflow_id IS NOT NULL";

/// See [`JobPruneParams`].
pub(crate) fn prune(conn: &mut SqliteConnection, params: &JobPruneParams) -> Result<i64> {
    let cutoff = now_ms(params.now).saturating_sub(millis(params.retention));
    let gone: Vec<Member> = CachedQuery::new(PRUNE)
        .bind::<Text, _>(params.state.as_str())
        .bind::<BigInt, _>(cutoff)
        .bind::<BigInt, _>(params.limit)
        .load(conn)?;
    let ids: Vec<i64> = gone.iter().map(|r| r.id).collect();
    if !ids.is_empty() {
        CachedQuery::new(PRUNE_EDGES).bind::<Text, _>(super::read::ids_json(&ids)).execute(conn)?;
    }
    let workflows = Member::workflows(&gone);
    if !workflows.is_empty() {
        CachedQuery::new(DELETE_EMPTY_WORKFLOWS)
            .bind::<Text, _>(super::read::ids_json(&workflows))
            .execute(conn)?;
    }
    Ok(ids.len() as i64)
}
