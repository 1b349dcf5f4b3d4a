//! The pruner's statements: finished jobs past their retention go, their own dependency
//! edges with them (the workflows they emptied go with the pruner's sweep of workflows,
//! `Driver::workflow_prune`).

use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::rows::Id;
use jobs_driver::{JobPruneParams, Result};

use crate::cached::CachedQuery;
use crate::time::{micros, naive_opt};

/// See [`JobPruneParams`].
pub(crate) async fn prune(conn: &mut AsyncMysqlConnection, params: JobPruneParams) -> Result<i64> {
    let doomed: Vec<Id> = CachedQuery::new(
        "SELECT id FROM jobs WHERE state = $1 AND state_at < COALESCE($2, UTC_TIMESTAMP(6)) - INTERVAL $3 MICROSECOND
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
    Ok(n as i64)
}
