//! The claim: one statement takes a batch of available jobs.
//!
//! SQLite has no `SKIP LOCKED` and needs none: a statement that writes holds the
//! database's one write lock from its start, so two claims never see the same row as
//! available. The statement runs in an immediate transaction (see `exec::write`).

use diesel::sql_types::{BigInt, Integer, Nullable, SmallInt, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{ClaimedJob, Result};

use crate::cached::CachedQuery;
use crate::rows::json;
use crate::time::from_ms;

/// A claim statement: what it sets and returns around the `WHERE` given. Its `$3` is the
/// node, its `$4` the claim's time.
macro_rules! claim_update {
    ($where:expr) => {
        concat!(
            "UPDATE jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = $4,
    attempted_by = json_insert(attempted_by, '$[#]', $3)
",
            $where,
            "
RETURNING id, kind, queue, args, meta, tags, priority, attempt, max_attempts, timeout_ms,
          created_at, scheduled_at, attempted_at, workflow_id"
        )
    };
}
pub(crate) use claim_update;

pub(crate) const CLAIM: &str = claim_update!(
    "WHERE id IN (
    SELECT id FROM jobs
    WHERE state = 'available' AND queue = $1
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
    ORDER BY priority, scheduled_at, id
    LIMIT $2
)"
);

/// A claimed row as a claim statement returns it.
#[derive(QueryableByName)]
pub(crate) struct ClaimedRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    args: String,
    #[diesel(sql_type = Text)]
    meta: String,
    #[diesel(sql_type = Text)]
    tags: String,
    #[diesel(sql_type = SmallInt)]
    priority: i16,
    #[diesel(sql_type = Integer)]
    attempt: i32,
    #[diesel(sql_type = Integer)]
    max_attempts: i32,
    #[diesel(sql_type = Nullable<BigInt>)]
    timeout_ms: Option<i64>,
    #[diesel(sql_type = BigInt)]
    created_at: i64,
    #[diesel(sql_type = BigInt)]
    scheduled_at: i64,
    #[diesel(sql_type = BigInt)]
    attempted_at: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    workflow_id: Option<i64>,
}

/// Claims up to `limit` available jobs of `queue` for `node` at `now_ms`: the highest
/// priority first, then the longest due, then the oldest. A paused queue yields nothing.
/// Returns them in that order (SQLite returns updated rows in no particular order).
pub(crate) fn claim(
    conn: &mut SqliteConnection,
    queue: &str,
    limit: usize,
    node: &str,
    now_ms: i64,
) -> Result<Vec<ClaimedJob>> {
    let rows: Vec<ClaimedRow> = CachedQuery::new(CLAIM)
        .bind::<Text, _>(queue)
        .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind::<Text, _>(node)
        .bind::<BigInt, _>(now_ms)
        .load(conn)?;
    decode(rows)
}

/// The claimed rows as jobs, in claim order (SQLite returns updated rows in no particular
/// order).
pub(crate) fn decode(rows: Vec<ClaimedRow>) -> Result<Vec<ClaimedJob>> {
    let mut claimed = rows
        .into_iter()
        .map(|r| {
            Ok(ClaimedJob {
                id: r.id,
                kind: r.kind,
                queue: r.queue,
                args: r.args,
                meta: r.meta,
                tags: if r.tags == "[]" { Vec::new() } else { json("tags", &r.tags)? },
                priority: r.priority,
                attempt: r.attempt,
                max_attempts: r.max_attempts,
                timeout_ms: r.timeout_ms,
                created_at: from_ms(r.created_at),
                scheduled_at: from_ms(r.scheduled_at),
                attempted_at: from_ms(r.attempted_at),
                workflow_id: r.workflow_id,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    claimed.sort_unstable_by_key(|j| (j.priority, j.scheduled_at, j.id));
    Ok(claimed)
}
