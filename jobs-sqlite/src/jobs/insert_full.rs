//! The row factory's insert: jobs exactly as given, in any state.

use diesel::sql_types::{BigInt, Binary, Integer, Nullable, SmallInt, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::{JobInsertFull, Result};

use super::insert::{states_json, strings_json};
use crate::rows::Id;
use crate::time::{now_ms, to_ms};

const INSERT_FULL: &str = "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, attempt, max_attempts, timeout_ms,
                  created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors, result,
                  cancel_requested_at, unique_key, unique_states)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id";

/// Inserts `jobs` as given, in input order, in the caller's transaction. Returns their ids.
pub(crate) fn insert_full_many(conn: &mut SqliteConnection, jobs: &[JobInsertFull]) -> Result<Vec<i64>> {
    let now = now_ms(None);
    let mut ids = Vec::with_capacity(jobs.len());
    for job in jobs {
        let row: Id = diesel::sql_query(INSERT_FULL)
            .bind::<Text, _>(job.state.as_str())
            .bind::<Text, _>(&job.kind)
            .bind::<Text, _>(&job.queue)
            .bind::<Text, _>(job.args.to_string())
            .bind::<Text, _>(job.meta.to_string())
            .bind::<Text, _>(strings_json(&job.tags))
            .bind::<SmallInt, _>(job.priority)
            .bind::<Integer, _>(job.attempt)
            .bind::<Integer, _>(job.max_attempts)
            .bind::<Nullable<BigInt>, _>(job.timeout_ms)
            .bind::<BigInt, _>(job.created_at.map_or(now, to_ms))
            .bind::<BigInt, _>(job.scheduled_at.map_or(now, to_ms))
            .bind::<Nullable<BigInt>, _>(job.attempted_at.map(to_ms))
            .bind::<Nullable<BigInt>, _>(job.finalized_at.map(to_ms))
            .bind::<Text, _>(strings_json(&job.attempted_by))
            .bind::<Text, _>(serde_json::Value::from(job.errors.clone()).to_string())
            .bind::<Nullable<Text>, _>(job.result.as_ref().map(|r| r.to_string()))
            .bind::<Nullable<BigInt>, _>(job.cancel_requested_at.map(to_ms))
            .bind::<Nullable<Binary>, _>(job.unique.as_ref().map(|(key, _)| key.clone()))
            .bind::<Nullable<Text>, _>(job.unique.as_ref().map(|(_, states)| states_json(states)))
            .get_result(conn)?;
        ids.push(row.id);
    }
    Ok(ids)
}
