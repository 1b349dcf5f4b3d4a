//! The pruner's statements: finished jobs past their retention go, their own dependency
//! edges with them, and the workflows they emptied (also after a person's delete).

use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::rows::Member;
use jobs_driver::{JobPruneParams, Result};

use crate::cached::CachedQuery;
use crate::time::{micros, naive_opt};

/// Of the workflows `$1` (a JSON array of ids), deletes those no member is left in (after
/// a prune or a person's delete), but a batch that may still take members (unsealed: an
/// add may be committing).
pub(crate) const DELETE_EMPTY_WORKFLOWS: &str = concat!(
    "DELETE w FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t ",
    "STRAIGHT_JOIN job_workflows w FORCE INDEX (PRIMARY) ON w.id = t.id ",
    "WHERE (w.callback_id IS NULL OR w.sealed_at IS NOT NULL) ",
    "AND NOT EXISTS (SELECT 1 FROM jobs j FORCE INDEX (jobs_workflow_idx) WHERE j.workflow_id = w.id)"
);

/// The workflows of the jobs `$1` (a JSON array of ids): before a delete, those it may
/// empty.
pub(crate) const WORKFLOWS_OF: &str = concat!(
    "SELECT DISTINCT j.workflow_id AS id FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t ",
    "STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = t.id WHERE j.workflow_id IS NOT NULL"
);

/// See [`JobPruneParams`].
pub(crate) async fn prune(conn: &mut AsyncMysqlConnection, params: JobPruneParams) -> Result<i64> {
    let doomed: Vec<Member> = CachedQuery::new(
        "SELECT id, workflow_id FROM jobs WHERE state = $1 AND state_at < COALESCE($2, UTC_TIMESTAMP(6)) - INTERVAL $3 MICROSECOND
         ORDER BY state_at LIMIT $4",
    )
    .bind::<Text, _>(params.state.as_str())
    .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
    .bind::<BigInt, _>(micros(params.retention))
    .bind::<BigInt, _>(params.limit)
    .load(conn)
    .await?;
    if doomed.is_empty() {
        return Ok(0);
    }
    let ids = super::read::ids_json(&doomed.iter().map(|r| r.id).collect::<Vec<_>>());
    let n = CachedQuery::new(concat!("DELETE j FROM ", by_ids!(), " WHERE j.state = $2"))
        .bind::<Text, _>(ids.as_str())
        .bind::<Text, _>(params.state.as_str())
        .execute(conn)
        .await?;
    // A pruned job's own dependencies go with it (their copied results were its to read);
    // its dependents keep theirs on it, settled, until they go. (A job retried meanwhile
    // was not deleted, and keeps them.)
    CachedQuery::new(concat!(
        "DELETE d FROM JSON_TABLE($1, '$[*]' COLUMNS (id BIGINT PATH '$')) AS t ",
        "STRAIGHT_JOIN job_dependencies d FORCE INDEX (job_dependencies_job_idx) ON d.job_id = t.id ",
        "WHERE NOT EXISTS (SELECT 1 FROM jobs j FORCE INDEX (PRIMARY) WHERE j.id = t.id)"
    ))
    .bind::<Text, _>(ids.as_str())
    .execute(conn)
    .await?;
    // A workflow goes with its last member; a batch that may still take members (unsealed)
    // stays, as on every backend.
    let workflows = Member::workflows(&doomed);
    if !workflows.is_empty() {
        CachedQuery::new(DELETE_EMPTY_WORKFLOWS)
            .bind::<Text, _>(super::read::ids_json(&workflows))
            .execute(conn)
            .await?;
    }
    Ok(n as i64)
}
