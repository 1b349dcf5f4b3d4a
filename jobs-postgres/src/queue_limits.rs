//! Claims on a queue with cluster-wide limits: the statements of
//! [`jobs_driver::limited_claim`], run in one transaction that holds the queue's row.

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamptz};
use diesel::{OptionalExtension, QueryableByName};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use jobs_driver::limited_claim::{LimitedClaimOps, StoredLimits, claim_limited};
use jobs_driver::partition::{KeyRate, KeyedClaimOps, PartitionTurn, Share};
use jobs_driver::rows::Count;
use jobs_driver::{ClaimedJob, DriverError, JobClaimParams, RateWindow, Result};

use crate::cached::CachedQuery;
use crate::jobs::claim::{self, ClaimedColumns, ClaimedRow, claim_update};
use crate::key_rates;

// The claim's time is read once the row is locked (the outer select runs after the locking
// one returned it), not at the transaction's start: a claim that waited for the lock counts
// its starts, and stamps its jobs, at the time they really start.
const LOCK_LIMITS: &str = "\
WITH locked AS (
    SELECT (settings ->> 'global_limit')::int8 AS global_limit,
           (settings ->> 'per_key_limit')::int8 AS per_key_limit,
           (settings ->> 'rate_allowed')::int8 AS rate_allowed,
           (settings ->> 'rate_period_secs')::int8 AS rate_period_secs,
           (settings ->> 'per_key_rate_allowed')::int8 AS per_key_rate_allowed,
           (settings ->> 'per_key_rate_period_secs')::int8 AS per_key_rate_period_secs,
           rate_window, rate_counts, partition_turn
    FROM job_queues WHERE name = $1
    FOR UPDATE
)
SELECT locked.*, COALESCE($2::timestamptz, clock_timestamp()) AS now FROM locked";

const CREATE_ROW: &str = "INSERT INTO job_queues (name) VALUES ($1) ON CONFLICT (name) DO NOTHING";

// Statements of their own, after the lock: their snapshot then holds every claim
// committed by the transactions the lock waited for. The runs that ended here and wait
// for their outcome's write ($2, $3: job, attempt) run nothing and are left out.
const COUNT_RUNNING: &str = "\
SELECT count(*) AS n FROM jobs
WHERE queue = $1 AND state = 'running'
  AND NOT EXISTS (SELECT FROM unnest($2::int8[], $3::int4[]) AS e(id, attempt)
                  WHERE e.id = jobs.id AND e.attempt = jobs.attempt)";

const RUNNING_BY_KEY: &str = "\
SELECT meta ->> '_partition_key' AS key, count(*) AS n
FROM jobs WHERE queue = $1 AND state = 'running'
  AND NOT EXISTS (SELECT FROM unnest($2::int8[], $3::int4[]) AS e(id, attempt)
                  WHERE e.id = jobs.id AND e.attempt = jobs.attempt)
GROUP BY 1";

/// The recursive walk over the keys after `$2`, one index probe each (jobs_partition_idx):
/// each step goes from a key to the next, at most `$3` steps, and further only while the
/// condition given holds.
macro_rules! keys_walk {
    ($go_on:expr, $keep:expr) => {
        concat!(
            "WITH RECURSIVE k(key, n) AS (
    (SELECT meta ->> '_partition_key', 1 FROM jobs
     WHERE queue = $1 AND state = 'available' AND (meta ->> '_partition_key') IS NOT NULL
       AND (meta ->> '_partition_key') > $2
     ORDER BY meta ->> '_partition_key' LIMIT 1)
    UNION ALL
    SELECT (SELECT meta ->> '_partition_key' FROM jobs
            WHERE queue = $1 AND state = 'available' AND (meta ->> '_partition_key') IS NOT NULL
              AND (meta ->> '_partition_key') > k.key
            ORDER BY meta ->> '_partition_key' LIMIT 1), k.n + 1
    FROM k WHERE k.key IS NOT NULL AND k.n < $3",
            $go_on,
            "
)
SELECT key FROM k WHERE key IS NOT NULL",
            $keep,
            " ORDER BY n"
        )
    };
}

// Up to $3 keys after $2 ('' for all).
pub(crate) const KEYS_AFTER: &str = keys_walk!("", "");

// Up to $3 keys after $2 and not after $4.
const KEYS_BETWEEN: &str = keys_walk!(" AND k.key < $4", " AND key <= $4");

// The greatest key waiting: the end of a round that starts.
const LAST_KEY: &str = "\
SELECT meta ->> '_partition_key' AS key FROM jobs
WHERE queue = $1 AND state = 'available' AND (meta ->> '_partition_key') IS NOT NULL
ORDER BY meta ->> '_partition_key' DESC LIMIT 1";

// Each share's first jobs of its key, in claim order, through jobs_partition_idx.
pub(crate) const CLAIM_KEYED: &str = claim_update!(
    "WHERE jobs.id = ANY (ARRAY(
    SELECT j.id FROM unnest($2::text[], $5::int8[]) AS s(key, take)
    CROSS JOIN LATERAL (
        SELECT id FROM jobs
        WHERE queue = $1 AND state = 'available' AND (meta ->> '_partition_key') IS NOT NULL
          AND (meta ->> '_partition_key') = s.key
        ORDER BY priority, scheduled_at, id
        LIMIT s.take
        FOR UPDATE SKIP LOCKED
    ) j
    WHERE NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
))"
);

// The unkeyed jobs' share: the queue's line, past the keyed jobs (see jobs_driver::partition).
const CLAIM_UNKEYED: &str = claim_update!(
    "WHERE jobs.id = ANY (ARRAY(
    SELECT id FROM jobs
    WHERE state = 'available' AND queue = $1 AND (meta ->> '_partition_key') IS NULL
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
    ORDER BY priority, scheduled_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
))"
);

const STORE: &str = "\
UPDATE job_queues
SET rate_window = COALESCE($2, rate_window), rate_counts = COALESCE($3, rate_counts),
    partition_turn = COALESCE($4, partition_turn)
WHERE name = $1";

#[derive(QueryableByName)]
struct LimitsRow {
    #[diesel(sql_type = Nullable<BigInt>)]
    global_limit: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    per_key_limit: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_allowed: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_period_secs: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    per_key_rate_allowed: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    per_key_rate_period_secs: Option<i64>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    rate_window: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    partition_turn: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    now: DateTime<Utc>,
}

#[derive(QueryableByName)]
struct KeyCount {
    #[diesel(sql_type = Nullable<Text>)]
    key: Option<String>,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Key {
    #[diesel(sql_type = Text)]
    key: String,
}

/// See [`JobClaimParams`]: a claim under the queue's limits when `limited`, otherwise the
/// plain claim.
pub(crate) async fn claim(
    conn: &mut AsyncPgConnection,
    params: JobClaimParams<'_>,
) -> Result<Vec<ClaimedJob>> {
    if !params.limited {
        return claim::claim(conn, params).await;
    }
    conn.transaction::<_, DriverError, _>(async |tx| {
        let mut ops = Limited { tx, params };
        claim_limited(&mut ops, params.limit, &params.declared).await
    })
    .await
}

/// A limited claim's statements on one transaction.
struct Limited<'c, 'p> {
    tx: &'c mut AsyncPgConnection,
    params: JobClaimParams<'p>,
}

impl Limited<'_, '_> {
    async fn run(
        &mut self,
        sql: &'static str,
        keys: Vec<String>,
        takes: Vec<i64>,
    ) -> Result<Vec<ClaimedJob>> {
        let p = self.params;
        let rows: Vec<ClaimedRow> = CachedQuery::new(sql)
            .bind::<Text, _>(p.queue)
            .bind::<Array<Text>, _>(keys)
            .bind::<Text, _>(p.node)
            .bind::<Nullable<Timestamptz>, _>(p.now)
            .bind::<Array<BigInt>, _>(takes)
            .returning::<ClaimedColumns>()
            .load(self.tx)
            .await?;
        Ok(rows.into_iter().map(ClaimedJob::from).collect())
    }
}

impl KeyedClaimOps for Limited<'_, '_> {
    async fn keys(&mut self, after: Option<&str>, until: Option<&str>, n: i64) -> Result<Vec<String>> {
        let keys: Vec<Key> = match until {
            Some(until) => {
                CachedQuery::new(KEYS_BETWEEN)
                    .bind::<Text, _>(self.params.queue)
                    .bind::<Text, _>(after.unwrap_or(""))
                    .bind::<BigInt, _>(n)
                    .bind::<Text, _>(until)
                    .load(self.tx)
                    .await?
            }
            None => {
                CachedQuery::new(KEYS_AFTER)
                    .bind::<Text, _>(self.params.queue)
                    .bind::<Text, _>(after.unwrap_or(""))
                    .bind::<BigInt, _>(n)
                    .load(self.tx)
                    .await?
            }
        };
        Ok(keys.into_iter().map(|k| k.key).collect())
    }

    async fn last_key(&mut self) -> Result<Option<String>> {
        let keys: Vec<Key> =
            CachedQuery::new(LAST_KEY).bind::<Text, _>(self.params.queue).load(self.tx).await?;
        Ok(keys.into_iter().next().map(|k| k.key))
    }

    async fn claim(&mut self, shares: &[Share]) -> Result<Vec<ClaimedJob>> {
        let mut jobs = Vec::new();
        let keyed: Vec<&Share> = shares.iter().filter(|s| s.key.is_some()).collect();
        if let Some(share) = shares.iter().find(|s| s.key.is_none()) {
            let p = self.params;
            let rows: Vec<ClaimedRow> = CachedQuery::new(CLAIM_UNKEYED)
                .bind::<Text, _>(p.queue)
                .bind::<BigInt, _>(share.take)
                .bind::<Text, _>(p.node)
                .bind::<Nullable<Timestamptz>, _>(p.now)
                .returning::<ClaimedColumns>()
                .load(self.tx)
                .await?;
            jobs.extend(rows.into_iter().map(ClaimedJob::from));
        }
        if !keyed.is_empty() {
            let keys = keyed.iter().filter_map(|s| s.key.clone()).collect();
            let takes = keyed.iter().map(|s| s.take).collect();
            jobs.extend(self.run(CLAIM_KEYED, keys, takes).await?);
        }
        Ok(jobs)
    }

    async fn rate_blocked(&mut self, now: DateTime<Utc>) -> Result<i64> {
        key_rates::blocked(self.tx, self.params.queue, now).await
    }

    async fn key_rates(&mut self, keys: &[String]) -> Result<Vec<KeyRate>> {
        key_rates::read(self.tx, self.params.queue, keys).await
    }

    async fn store_key_rates(&mut self, rates: &[KeyRate], stale_before: DateTime<Utc>) -> Result<()> {
        key_rates::write(self.tx, self.params.queue, rates, stale_before).await
    }
}

impl LimitedClaimOps for Limited<'_, '_> {
    async fn lock_limits(&mut self) -> Result<Option<StoredLimits>> {
        let row: Option<LimitsRow> = diesel::sql_query(LOCK_LIMITS)
            .bind::<Text, _>(self.params.queue)
            .bind::<Nullable<Timestamptz>, _>(self.params.now)
            .get_result(self.tx)
            .await
            .optional()?;
        // The claim's statements stamp its jobs with the time it counts them at.
        if let Some(r) = &row {
            self.params.now = Some(r.now);
        }
        Ok(row.map(|r| StoredLimits {
            global_limit: r.global_limit,
            per_key_limit: r.per_key_limit,
            rate_allowed: r.rate_allowed,
            rate_period_secs: r.rate_period_secs,
            per_key_rate_allowed: r.per_key_rate_allowed,
            per_key_rate_period_secs: r.per_key_rate_period_secs,
            rate_window: r.rate_window,
            rate_counts: r.rate_counts,
            partition_turn: r.partition_turn,
            now: r.now,
        }))
    }

    async fn create_row(&mut self) -> Result<()> {
        diesel::sql_query(CREATE_ROW).bind::<Text, _>(self.params.queue).execute(self.tx).await?;
        Ok(())
    }

    async fn running(&mut self, by_key: bool) -> Result<Vec<(Option<String>, i64)>> {
        let queue = self.params.queue;
        let ids: Vec<i64> = self.params.ended.iter().map(|&(id, _)| id).collect();
        let attempts: Vec<i32> = self.params.ended.iter().map(|&(_, attempt)| attempt).collect();
        if !by_key {
            let n = CachedQuery::new(COUNT_RUNNING)
                .bind::<Text, _>(queue)
                .bind::<Array<BigInt>, _>(ids)
                .bind::<Array<Integer>, _>(attempts)
                .get_result::<Count>(self.tx)
                .await?
                .n;
            return Ok(vec![(None, n)]);
        }
        let rows: Vec<KeyCount> = CachedQuery::new(RUNNING_BY_KEY)
            .bind::<Text, _>(queue)
            .bind::<Array<BigInt>, _>(ids)
            .bind::<Array<Integer>, _>(attempts)
            .load(self.tx)
            .await?;
        Ok(rows.into_iter().map(|r| (r.key, r.n)).collect())
    }

    async fn claim_plain(&mut self, limit: usize) -> Result<Vec<ClaimedJob>> {
        let p = self.params;
        let params = JobClaimParams {
            limit,
            recurring_size: p.recurring_size && limit == p.limit,
            limited: false,
            ..p
        };
        claim::claim(self.tx, params).await
    }

    async fn store(&mut self, usage: Option<&RateWindow>, turn: Option<&PartitionTurn>) -> Result<()> {
        CachedQuery::new(STORE)
            .bind::<Text, _>(self.params.queue)
            .bind::<Nullable<Timestamptz>, _>(usage.map(|u| u.start))
            .bind::<Nullable<Text>, _>(usage.map(RateWindow::encode_counts))
            .bind::<Nullable<Text>, _>(turn.map(PartitionTurn::encode))
            .execute(self.tx)
            .await?;
        Ok(())
    }
}
