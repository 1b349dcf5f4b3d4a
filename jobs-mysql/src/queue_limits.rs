//! Claims on a queue with cluster-wide limits: the statements of
//! [`jobs_driver::limited_claim`], run in one transaction that holds the queue's row.

use chrono::{DateTime, NaiveDateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::limited_claim::{LimitedClaimOps, StoredLimits, claim_limited, ended_runs_json};
use jobs_driver::partition::{KeyRate, KeyedClaimOps, PartitionTurn, Share};
use jobs_driver::rows::Count;
use jobs_driver::{ClaimedJob, DriverError, JobClaimParams, RateWindow, Result};

use crate::cached::CachedQuery;
use crate::jobs::claim::{self, claim_update};
use crate::key_rates;
use crate::rows::token;
use crate::time::{naive, naive_opt, utc};

const LOCK_LIMITS: &str = "\
SELECT CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.global_limit')) AS SIGNED) AS global_limit,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.per_key_limit')) AS SIGNED) AS per_key_limit,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_allowed')) AS SIGNED) AS rate_allowed,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_period_secs')) AS SIGNED) AS rate_period_secs,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.per_key_rate_allowed')) AS SIGNED) AS per_key_rate_allowed,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.per_key_rate_period_secs')) AS SIGNED) AS per_key_rate_period_secs,
       rate_window, rate_counts, partition_turn
FROM job_queues WHERE name = $1
FOR UPDATE";

// The claim's time, read once the row is locked (a statement's `UTC_TIMESTAMP` is fixed when
// it starts, before a lock wait): the claim counts its starts, and stamps its jobs, at it.
const CLOCK: &str = "SELECT COALESCE($1, UTC_TIMESTAMP(6)) AS now";

const CREATE_ROW: &str = "\
INSERT INTO job_queues (name, paused, settings, created_at, updated_at)
VALUES ($1, FALSE, '{}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE name = name";

// Statements of their own, after the lock (read committed: a snapshot per statement), so
// that they see every claim committed by the transactions the lock waited for. The runs
// that ended here and wait for their outcome's write ($2: `[[job, attempt], ...]`) run
// nothing and are left out. (MariaDB checks each running row against the list, as it
// would a `NOT EXISTS`: the list holds at most the node's slots, the rows the queue's
// running jobs.)
macro_rules! running_where {
    () => {
        "queue = $1 AND state = 'running'
  AND (id, attempt) NOT IN (
      SELECT e.id, e.attempt
      FROM JSON_TABLE($2, '$[*]' COLUMNS (id BIGINT PATH '$[0]', attempt INT PATH '$[1]')) AS e)"
    };
}

const COUNT_RUNNING: &str = concat!("SELECT COUNT(*) AS n FROM jobs WHERE ", running_where!());

pub(crate) const RUNNING_BY_KEY: &str = concat!(
    "SELECT partition_key AS pkey, COUNT(*) AS n FROM jobs WHERE ",
    running_where!(),
    " GROUP BY partition_key"
);

/// The recursive walk over the keys after `$2` in jobs_partition_idx (queue, state,
/// partition_key, ...): each step goes from a key to the next with one probe, at most `$3`
/// steps (MySQL refuses a recursion deeper than its `cte_max_recursion_depth`, 1,000 by
/// default: [`MAX_WALK`] per statement), and further only while the condition given
/// holds. (Neither server reads `GROUP BY`/`DISTINCT` here as a loose index scan: they
/// would read every job of a busy key.)
macro_rules! keys_walk {
    ($go_on:expr, $keep:expr) => {
        concat!(
            "WITH RECURSIVE k (pkey, n) AS (
    (SELECT partition_key, 1 FROM jobs FORCE INDEX (jobs_partition_idx)
     WHERE queue = $1 AND state = 'available' AND partition_key > $2
     ORDER BY partition_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.partition_key FROM jobs j FORCE INDEX (jobs_partition_idx)
            WHERE j.queue = $1 AND j.state = 'available' AND j.partition_key > k.pkey
            ORDER BY j.partition_key LIMIT 1), k.n + 1
    FROM k WHERE k.pkey IS NOT NULL AND k.n < $3",
            $go_on,
            "
)
SELECT pkey FROM k WHERE pkey IS NOT NULL",
            $keep,
            " ORDER BY n"
        )
    };
}

/// The most keys one walk lists (see [`keys_walk`]).
const MAX_WALK: i64 = 900;

// Up to $3 keys after $2 ('' for all).
pub(crate) const KEYS_AFTER: &str = keys_walk!("", "");

// Up to $3 keys after $2 and not after $4.
const KEYS_BETWEEN: &str = keys_walk!(" AND k.pkey < $4", " AND pkey <= $4");

// The greatest key waiting: the end of a round that starts.
const LAST_KEY: &str = "\
SELECT partition_key AS pkey FROM jobs FORCE INDEX (jobs_partition_idx)
WHERE queue = $1 AND state = 'available' AND partition_key IS NOT NULL
ORDER BY partition_key DESC LIMIT 1";

// One share: its key's ($6) first jobs, through jobs_partition_idx.
pub(crate) const CLAIM_KEY: &str = claim_update!(
    "SELECT id FROM jobs FORCE INDEX (jobs_partition_idx)
        WHERE queue = $1 AND state = 'available' AND partition_key = $6
          AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
        ORDER BY priority, scheduled_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED"
);

// The unkeyed jobs' share: jobs_partition_idx holds them too (under NULL).
const CLAIM_UNKEYED: &str = claim_update!(
    "SELECT id FROM jobs FORCE INDEX (jobs_partition_idx)
        WHERE queue = $1 AND state = 'available' AND partition_key IS NULL
          AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
        ORDER BY priority, scheduled_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED"
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
    #[diesel(sql_type = Nullable<Datetime>)]
    rate_window: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    partition_turn: Option<String>,
}

#[derive(QueryableByName)]
struct Clock {
    #[diesel(sql_type = Datetime)]
    now: NaiveDateTime,
}

#[derive(QueryableByName)]
struct KeyCount {
    #[diesel(sql_type = Nullable<Text>)]
    pkey: Option<String>,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct Key {
    #[diesel(sql_type = Text)]
    pkey: String,
}

/// See [`JobClaimParams`]: a claim under the queue's limits when `limited`, otherwise the
/// plain claim.
pub(crate) async fn claim(
    conn: &mut AsyncMysqlConnection,
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
    tx: &'c mut AsyncMysqlConnection,
    params: JobClaimParams<'p>,
}

impl KeyedClaimOps for Limited<'_, '_> {
    async fn keys(&mut self, after: Option<&str>, until: Option<&str>, n: i64) -> Result<Vec<String>> {
        let mut keys: Vec<String> = Vec::new();
        loop {
            let last = keys.last().map(String::as_str).or(after).unwrap_or("");
            let step = (n - i64::try_from(keys.len()).unwrap_or(i64::MAX)).min(MAX_WALK);
            if step <= 0 {
                break;
            }
            let query = CachedQuery::new(if until.is_some() { KEYS_BETWEEN } else { KEYS_AFTER })
                .bind::<Text, _>(self.params.queue)
                .bind::<Text, _>(last.to_owned())
                .bind::<BigInt, _>(step);
            let query = match until {
                Some(until) => query.bind::<Text, _>(until),
                None => query,
            };
            let found: Vec<Key> = query.load(self.tx).await?;
            let full = i64::try_from(found.len()).unwrap_or(i64::MAX) == step;
            keys.extend(found.into_iter().map(|k| k.pkey));
            if !full {
                break;
            }
        }
        Ok(keys)
    }

    async fn last_key(&mut self) -> Result<Option<String>> {
        let keys: Vec<Key> =
            CachedQuery::new(LAST_KEY).bind::<Text, _>(self.params.queue).load(self.tx).await?;
        Ok(keys.into_iter().next().map(|k| k.pkey))
    }

    async fn claim(&mut self, shares: &[Share]) -> Result<Vec<ClaimedJob>> {
        let p = self.params;
        let token = token();
        let mut claimed = 0;
        for share in shares {
            let statement = if share.key.is_some() { CLAIM_KEY } else { CLAIM_UNKEYED };
            let query = CachedQuery::new(statement)
                .bind::<Text, _>(p.queue)
                .bind::<BigInt, _>(share.take)
                .bind::<Text, _>(p.node)
                .bind::<Nullable<Datetime>, _>(naive_opt(p.now))
                .bind::<BigInt, _>(token);
            let query = match &share.key {
                Some(key) => query.bind::<Text, _>(key.as_str()),
                None => query,
            };
            claimed += query.execute(self.tx).await?;
        }
        if claimed == 0 {
            return Ok(Vec::new());
        }
        claim::read_back(self.tx, p.queue, token, claimed).await
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
        let rows: Vec<LimitsRow> =
            CachedQuery::new(LOCK_LIMITS).bind::<Text, _>(self.params.queue).load(self.tx).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let clock: Vec<Clock> = CachedQuery::new(CLOCK)
            .bind::<Nullable<Datetime>, _>(naive_opt(self.params.now))
            .load(self.tx)
            .await?;
        let now = clock.into_iter().next().map_or_else(chrono::Utc::now, |c| utc(c.now));
        self.params.now = Some(now);
        Ok(rows.into_iter().next().map(|r| StoredLimits {
            global_limit: r.global_limit,
            per_key_limit: r.per_key_limit,
            rate_allowed: r.rate_allowed,
            rate_period_secs: r.rate_period_secs,
            per_key_rate_allowed: r.per_key_rate_allowed,
            per_key_rate_period_secs: r.per_key_rate_period_secs,
            rate_window: r.rate_window.map(utc),
            rate_counts: r.rate_counts,
            partition_turn: r.partition_turn,
            now,
        }))
    }

    async fn create_row(&mut self) -> Result<()> {
        CachedQuery::new(CREATE_ROW).bind::<Text, _>(self.params.queue).execute(self.tx).await?;
        Ok(())
    }

    async fn running(&mut self, by_key: bool) -> Result<Vec<(Option<String>, i64)>> {
        let queue = self.params.queue;
        let ended = ended_runs_json(self.params.ended);
        if !by_key {
            let counted: Vec<Count> = CachedQuery::new(COUNT_RUNNING)
                .bind::<Text, _>(queue)
                .bind::<Text, _>(&ended)
                .load(self.tx)
                .await?;
            return Ok(vec![(None, counted.iter().map(|c| c.n).next().unwrap_or(0))]);
        }
        let rows: Vec<KeyCount> = CachedQuery::new(RUNNING_BY_KEY)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(&ended)
            .load(self.tx)
            .await?;
        Ok(rows.into_iter().map(|r| (r.pkey, r.n)).collect())
    }

    async fn claim_plain(&mut self, limit: usize) -> Result<Vec<ClaimedJob>> {
        let params = JobClaimParams { limit, limited: false, ..self.params };
        claim::claim(self.tx, params).await
    }

    async fn store(&mut self, usage: Option<&RateWindow>, turn: Option<&PartitionTurn>) -> Result<()> {
        CachedQuery::new(STORE)
            .bind::<Text, _>(self.params.queue)
            .bind::<Nullable<Datetime>, _>(usage.map(|u| naive(u.start)))
            .bind::<Nullable<Text>, _>(usage.map(RateWindow::encode_counts))
            .bind::<Nullable<Text>, _>(turn.map(PartitionTurn::encode))
            .execute(self.tx)
            .await?;
        Ok(())
    }
}
