//! The archive (`jobs_archive`, migration `jobs_archive`): finished jobs out of the hot
//! table. A success moves in its completion statement (`complete.rs`); a job that finished
//! any other way is finished in `jobs` and moved here by [`archive`] (the leader's
//! archiver, every second). A retry moves a job back (`control.rs`). Reads go through the
//! view `jobs_all`.
//!
//! A finished job whose state is one of its unique states holds its key and stays in
//! `jobs`, where `jobs_unique_idx` sees it, until it is pruned.

use diesel::pg::Pg;
use diesel::sql_types::{Array, BigInt};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobArchiveParams, Result};

use crate::rows::Count;

/// Every column of `jobs` and `jobs_archive`, in the tables' (and `jobs_all`'s) order.
macro_rules! job_columns {
    () => {
        "id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts, timeout_ms, \
         created_at, scheduled_at, attempted_at, finalized_at, attempted_by, errors, result, \
         cancel_requested_at, unique_key, unique_states, workflow_id, waiting_on, failed_on"
    };
}
pub(crate) use job_columns;

/// Whether row `$t` of `jobs` would hold its uniqueness key in state `$state` (a state
/// among its unique states): such a row stays in `jobs`, where `jobs_unique_idx` sees it.
macro_rules! holds_key {
    ($t:literal, $state:literal) => {
        concat!("(", $t, ".unique_key IS NOT NULL AND ", $state, " = ANY (", $t, ".unique_states))")
    };
}
pub(crate) use holds_key;

/// The rows of `jobs` that may leave it: finished, and not holding their uniqueness key.
/// (`jobs_archivable_idx`'s predicate, so that the index serves it.)
const ARCHIVABLE: &str = concat!("jobs.finalized_at IS NOT NULL AND NOT ", holds_key!("jobs", "jobs.state"));

/// Moves the archivable rows `batch` selects (`SELECT id FROM jobs WHERE {ARCHIVABLE} …`,
/// locking them) into the archive; counts them.
fn move_sql(batch: &str) -> String {
    format!(
        "\
WITH batch AS ({batch}), moved AS (
    DELETE FROM jobs USING batch WHERE jobs.id = batch.id
    RETURNING {returned}
), archived AS (
    INSERT INTO jobs_archive ({columns}) SELECT * FROM moved RETURNING 1
)
SELECT count(*) AS n FROM archived",
        columns = job_columns!(),
        returned = concat!("jobs.", job_columns!()).replace(", ", ", jobs."),
    )
}

static ARCHIVE_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    move_sql(&format!("SELECT id FROM jobs WHERE {ARCHIVABLE} LIMIT $1 FOR UPDATE SKIP LOCKED"))
});

static ARCHIVE_IDS_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    move_sql(&format!("SELECT id FROM jobs WHERE id = ANY ($1) AND {ARCHIVABLE} FOR UPDATE"))
});

/// See [`JobArchiveParams`].
pub(crate) async fn archive<C>(conn: &mut C, params: JobArchiveParams) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Count =
        diesel::sql_query(ARCHIVE_SQL.as_str()).bind::<BigInt, _>(params.limit).get_result(conn).await?;
    Ok(row.n)
}

/// Moves those of `ids` that may leave `jobs` into the archive (the row factory's rows in
/// final states go where the engine keeps them). Returns how many moved.
pub(crate) async fn archive_ids<C>(conn: &mut C, ids: &[i64]) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Count =
        diesel::sql_query(ARCHIVE_IDS_SQL.as_str()).bind::<Array<BigInt>, _>(ids).get_result(conn).await?;
    Ok(row.n)
}
