//! The claim: one statement takes a batch of available jobs `FOR UPDATE SKIP LOCKED` and
//! stamps them with its token; a second reads them back by the token (MariaDB and MySQL
//! have no `UPDATE … RETURNING`: seed 001's lock identifier). Both go through
//! `jobs_claim_idx (queue, state, running_token, priority, scheduled_at, id)`, where
//! `running_token` is the token while the row is `running` and NULL otherwise: the claim
//! reads a queue's available jobs in claim order (`running_token IS NULL` tells the
//! optimizer so), the read-back exactly the rows of its token.
//!
//! Both run in autocommit. Should the read-back never reach the worker (the connection
//! drops between them), the rows stay `running` on this node, which hands them back with
//! `job_release_orphans` after its grace period.

use chrono::NaiveDateTime;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Integer, Nullable, SmallInt, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{ClaimedJob, JobClaimParams, Result};

use crate::cached::CachedQuery;
use crate::rows::{json, token};
use crate::time::{naive_opt, utc};

// The locked ids come from a derived table that is read first (STRAIGHT_JOIN), so the
// update touches each claimed row once through the primary key, whatever the statistics:
// joined the other way round on a small table, InnoDB would scan, and wait on, rows other
// claimers hold.
/// A claim statement around the `SELECT` given, which locks the rows to take (its `$1` the
/// queue, its `$2` the most to take): they become `running` for the node (`$3`) at the
/// claim's time (`$4`), stamped with its token (`$5`).
macro_rules! claim_update {
    ($select:expr) => {
        concat!(
            "UPDATE (",
            $select,
            ") AS c
STRAIGHT_JOIN jobs j FORCE INDEX (PRIMARY) ON j.id = c.id
SET j.state = 'running',
    j.attempt = j.attempt + 1,
    j.attempted_at = COALESCE($4, UTC_TIMESTAMP(6)),
    j.attempted_by = JSON_ARRAY_APPEND(j.attempted_by, '$', $3),
    j.attempted_node = $3,
    j.lock_token = $5"
        )
    };
}
pub(crate) use claim_update;

pub(crate) const CLAIM: &str = claim_update!(
    "SELECT id FROM jobs
        WHERE queue = $1 AND state = 'available' AND running_token IS NULL
          AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
        ORDER BY priority, scheduled_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED"
);

pub(crate) const READ_BACK: &str = "\
SELECT id, kind, queue, args, meta, tags, priority, attempt, max_attempts, timeout_ms, created_at,
       scheduled_at, attempted_at, workflow_id
FROM jobs WHERE queue = $1 AND state = 'running' AND running_token = $2
ORDER BY priority, scheduled_at, id";

type ClaimedColumns = (
    BigInt,
    Text,
    Text,
    Text,
    Text,
    Text,
    SmallInt,
    Integer,
    Integer,
    Nullable<BigInt>,
    Datetime,
    Datetime,
    Nullable<Datetime>,
    Nullable<BigInt>,
);

#[derive(diesel::Queryable)]
struct ClaimedRow(
    i64,
    String,
    String,
    String,
    String,
    String,
    i16,
    i32,
    i32,
    Option<i64>,
    NaiveDateTime,
    NaiveDateTime,
    Option<NaiveDateTime>,
    Option<i64>,
);

impl ClaimedRow {
    fn into_claimed(self) -> Result<ClaimedJob> {
        Ok(ClaimedJob {
            id: self.0,
            kind: self.1,
            queue: self.2,
            args: self.3,
            meta: self.4,
            tags: json("tags", &self.5)?,
            priority: self.6,
            attempt: self.7,
            max_attempts: self.8,
            timeout_ms: self.9,
            created_at: utc(self.10),
            scheduled_at: utc(self.11),
            attempted_at: utc(self.12.unwrap_or(self.10)),
            workflow_id: self.13,
        })
    }
}

/// See [`JobClaimParams`].
pub(crate) async fn claim<C>(conn: &mut C, params: JobClaimParams<'_>) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let JobClaimParams { queue, limit, node, now, .. } = params;
    let token = token();
    let claimed = CachedQuery::new(CLAIM)
        .bind::<Text, _>(queue)
        .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind::<Text, _>(node)
        .bind::<Nullable<Datetime>, _>(naive_opt(now))
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    if claimed == 0 {
        return Ok(Vec::new());
    }
    read_back(conn, queue, token, claimed).await
}

/// Reads back the `claimed` rows a claim stamped with `token`.
pub(crate) async fn read_back<C>(
    conn: &mut C,
    queue: &str,
    token: i64,
    claimed: usize,
) -> Result<Vec<ClaimedJob>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<ClaimedRow> = CachedQuery::new(READ_BACK)
        .bind::<Text, _>(queue)
        .bind::<BigInt, _>(token)
        .returning::<ClaimedColumns>()
        .load(conn)
        .await?;
    if rows.len() != claimed {
        tracing::warn!(
            queue,
            claimed,
            read = rows.len(),
            "a claim read back fewer jobs than it took: the node hands the others back after its grace period"
        );
    }
    rows.into_iter().map(ClaimedRow::into_claimed).collect()
}
