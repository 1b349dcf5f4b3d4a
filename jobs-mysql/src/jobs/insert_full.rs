//! The row factory's insert: jobs exactly as given, in any state, one row per statement.

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, SmallInt, Text, Varbinary};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobInsertFull, Result};

use super::insert_sql::LAST_INSERT_ID;
use super::read::states_list;
use crate::cached::CachedQuery;
use crate::returning;
use crate::rows::Id;
use crate::time::naive;

/// The insert of one row, without anything after its values.
macro_rules! insert_full {
    () => {
        "INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, attempt, max_attempts, timeout_ms,
                  created_at, scheduled_at, attempted_at, finalized_at, attempted_by, attempted_node, errors,
                  result, cancel_requested_at, unique_key, unique_states)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE($11, UTC_TIMESTAMP(6)), COALESCE($12, UTC_TIMESTAMP(6)),
        $13, $14, $15, $16, $17, $18, $19, $20, $21)"
    };
}

/// The insert where the server returns the id (MariaDB).
const RETURNING_ID: &str = concat!(insert_full!(), "\nRETURNING id");

/// The insert where it does not (MySQL), followed by [`LAST_INSERT_ID`] on the same
/// connection.
const INSERT: &str = insert_full!();

/// Inserts `jobs` as given, in input order. Returns their ids.
pub(crate) async fn insert_full_many<C>(conn: &mut C, jobs: &[JobInsertFull]) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let returning = returning::insert_returning(conn).await?;
    let mut ids = Vec::with_capacity(jobs.len());
    for job in jobs {
        let insert = CachedQuery::new(if returning { RETURNING_ID } else { INSERT })
            .bind::<Text, _>(job.state.as_str())
            .bind::<Text, _>(&job.kind)
            .bind::<Text, _>(&job.queue)
            .bind::<Text, _>(job.args.to_string())
            .bind::<Text, _>(job.meta.to_string())
            .bind::<Text, _>(serde_json::Value::from(job.tags.as_slice()).to_string())
            .bind::<SmallInt, _>(job.priority)
            .bind::<Integer, _>(job.attempt)
            .bind::<Integer, _>(job.max_attempts)
            .bind::<Nullable<BigInt>, _>(job.timeout_ms)
            .bind::<Nullable<Datetime>, _>(job.created_at.map(naive))
            .bind::<Nullable<Datetime>, _>(job.scheduled_at.map(naive))
            .bind::<Nullable<Datetime>, _>(job.attempted_at.map(naive))
            .bind::<Nullable<Datetime>, _>(job.finalized_at.map(naive))
            .bind::<Text, _>(serde_json::Value::from(job.attempted_by.as_slice()).to_string())
            .bind::<Nullable<Text>, _>(job.attempted_by.last().map(String::as_str))
            .bind::<Text, _>(serde_json::Value::from(job.errors.clone()).to_string())
            .bind::<Nullable<Text>, _>(job.result.as_ref().map(|r| r.to_string()))
            .bind::<Nullable<Datetime>, _>(job.cancel_requested_at.map(naive))
            .bind::<Nullable<Varbinary>, _>(job.unique.as_ref().map(|(key, _)| key.clone()))
            .bind::<Nullable<Text>, _>(job.unique.as_ref().map(|(_, states)| states_list(states)));
        let row: Id = if returning {
            insert.get_result(conn).await?
        } else {
            insert.execute(conn).await?;
            CachedQuery::new(LAST_INSERT_ID).get_result(conn).await?
        };
        ids.push(row.id);
    }
    Ok(ids)
}
