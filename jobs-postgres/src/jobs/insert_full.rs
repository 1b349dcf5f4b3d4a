//! The row factory's insert: jobs exactly as given, in any state, one statement per batch;
//! finished ones then move to the archive, as the engine would have moved them.

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt, Bytea, Int2, Int4, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobInsertFull, Result};

use super::insert::states_literal;
use crate::rows::Id;

const INSERT_FULL: &str = "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, attempt, max_attempts, timeout_ms,
                  created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors, result,
                  cancel_requested_at, unique_key, unique_states)
SELECT u.state::job_state, u.kind, u.queue, u.args, u.meta, string_to_array(u.tags, ','), u.priority,
       u.attempt, u.max_attempts, u.timeout_ms, COALESCE(u.created_at, now()),
       COALESCE(u.scheduled_at, now()), u.attempted_at, u.finalized_at,
       string_to_array(u.attempted_by, ','), u.errors, u.result, u.cancel_requested_at, u.unique_key,
       u.unique_states::job_state[]
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::text[], $7::int2[],
            $8::int4[], $9::int4[], $10::int8[], $11::timestamptz[], $12::timestamptz[],
            $13::timestamptz[], $14::timestamptz[], $15::text[], $16::jsonb[], $17::jsonb[],
            $18::timestamptz[], $19::bytea[], $20::text[])
     WITH ORDINALITY AS u(state, kind, queue, args, meta, tags, priority, attempt, max_attempts,
                          timeout_ms, created_at, scheduled_at, attempted_at, finalized_at,
                          attempted_by, errors, result, cancel_requested_at, unique_key,
                          unique_states, ord)
ORDER BY u.ord
RETURNING id";

/// Rows per statement (every column is an array, so the count only bounds memory).
const CHUNK: usize = 10_000;

/// Inserts `jobs` as given; returns their ids in input order.
pub(crate) async fn insert_full_many<C>(conn: &mut C, jobs: &[JobInsertFull]) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let mut ids = Vec::with_capacity(jobs.len());
    for chunk in jobs.chunks(CHUNK) {
        let col =
            |f: &dyn Fn(&JobInsertFull) -> Option<DateTime<Utc>>| chunk.iter().map(f).collect::<Vec<_>>();
        let rows: Vec<Id> = diesel::sql_query(INSERT_FULL)
            .bind::<Array<Text>, _>(chunk.iter().map(|j| j.state.as_str()).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(chunk.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(chunk.iter().map(|j| j.queue.as_str()).collect::<Vec<_>>())
            .bind::<Array<Jsonb>, _>(chunk.iter().map(|j| j.args.clone()).collect::<Vec<_>>())
            .bind::<Array<Jsonb>, _>(chunk.iter().map(|j| j.meta.clone()).collect::<Vec<_>>())
            .bind::<Array<Text>, _>(chunk.iter().map(|j| j.tags.join(",")).collect::<Vec<_>>())
            .bind::<Array<Int2>, _>(chunk.iter().map(|j| j.priority).collect::<Vec<_>>())
            .bind::<Array<Int4>, _>(chunk.iter().map(|j| j.attempt).collect::<Vec<_>>())
            .bind::<Array<Int4>, _>(chunk.iter().map(|j| j.max_attempts).collect::<Vec<_>>())
            .bind::<Array<Nullable<BigInt>>, _>(chunk.iter().map(|j| j.timeout_ms).collect::<Vec<_>>())
            .bind::<Array<Nullable<Timestamptz>>, _>(col(&|j| j.created_at))
            .bind::<Array<Nullable<Timestamptz>>, _>(col(&|j| j.scheduled_at))
            .bind::<Array<Nullable<Timestamptz>>, _>(col(&|j| j.attempted_at))
            .bind::<Array<Nullable<Timestamptz>>, _>(col(&|j| j.finalized_at))
            .bind::<Array<Text>, _>(chunk.iter().map(|j| j.attempted_by.join(",")).collect::<Vec<_>>())
            .bind::<Array<Jsonb>, _>(
                chunk.iter().map(|j| serde_json::Value::Array(j.errors.clone())).collect::<Vec<_>>(),
            )
            .bind::<Array<Nullable<Jsonb>>, _>(chunk.iter().map(|j| j.result.clone()).collect::<Vec<_>>())
            .bind::<Array<Nullable<Timestamptz>>, _>(col(&|j| j.cancel_requested_at))
            .bind::<Array<Nullable<Bytea>>, _>(
                chunk.iter().map(|j| j.unique.as_ref().map(|(key, _)| key.clone())).collect::<Vec<_>>(),
            )
            .bind::<Array<Nullable<Text>>, _>(
                chunk
                    .iter()
                    .map(|j| j.unique.as_ref().map(|(_, states)| states_literal(states)))
                    .collect::<Vec<_>>(),
            )
            .load(conn)
            .await?;
        let chunk_ids: Vec<i64> = rows.into_iter().map(|r| r.id).collect();
        if chunk.iter().any(|j| j.state.is_final()) {
            super::archive::archive_ids(conn, &chunk_ids).await?;
        }
        ids.extend(chunk_ids);
    }
    Ok(ids)
}
