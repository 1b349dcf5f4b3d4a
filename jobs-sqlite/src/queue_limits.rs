//! Claims on a queue with cluster-wide limits: the statements of
//! [`jobs_driver::limited_claim`], run in the writer's immediate transaction, which
//! already makes every process's claims run one after another. They are synchronous: the
//! shared flow runs them through [`run_ready`].

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::limited_claim::{LimitedClaimOps, StoredLimits, claim_limited, ended_runs_json, run_ready};
use jobs_driver::partition::{KeyRate, KeyedClaimOps, PartitionTurn, Share};
use jobs_driver::rows::Count;
use jobs_driver::{ClaimedJob, DeclaredLimits, RateWindow, Result};

use crate::cached::CachedQuery;
use crate::jobs::claim::{self, ClaimedRow, claim_update};
use crate::key_rates;
use crate::time::{from_ms, to_ms};

const READ_LIMITS: &str = "\
SELECT json_extract(settings, '$.global_limit') AS global_limit,
       json_extract(settings, '$.per_key_limit') AS per_key_limit,
       json_extract(settings, '$.rate_allowed') AS rate_allowed,
       json_extract(settings, '$.rate_period_secs') AS rate_period_secs,
       json_extract(settings, '$.per_key_rate_allowed') AS per_key_rate_allowed,
       json_extract(settings, '$.per_key_rate_period_secs') AS per_key_rate_period_secs,
       rate_window, rate_counts, partition_turn
FROM job_queues WHERE name = $1";

const CREATE_ROW: &str = "\
INSERT INTO job_queues (name, created_at, updated_at) VALUES ($1, $2, $2) ON CONFLICT (name) DO NOTHING";

// The runs that ended here and wait for their outcome's write ($2: `[[job, attempt],
// ...]`) run nothing and are left out (`NOT IN`: the list is read once, not once per
// running row).
macro_rules! running_where {
    () => {
        "queue = $1 AND state = 'running'
  AND (jobs.id, jobs.attempt) NOT IN (SELECT e.value ->> 0, e.value ->> 1 FROM json_each($2) AS e)"
    };
}

const COUNT_RUNNING: &str = concat!("SELECT count(*) AS n FROM jobs WHERE ", running_where!());

const RUNNING_BY_KEY: &str = concat!(
    "SELECT json_extract(meta, '$._partition_key') AS key, count(*) AS n FROM jobs WHERE ",
    running_where!(),
    " GROUP BY 1"
);

// The next key after $2, one probe of jobs_partition_idx (the partial index's condition
// is spelled as in its definition, for SQLite to use it).
const NEXT_KEY: &str = "\
SELECT json_extract(meta, '$._partition_key') AS key FROM jobs
WHERE queue = $1 AND state = 'available' AND json_extract(meta, '$._partition_key') IS NOT NULL
  AND json_extract(meta, '$._partition_key') > $2
ORDER BY json_extract(meta, '$._partition_key')
LIMIT 1";

// The greatest key waiting: the end of a round that starts.
const LAST_KEY: &str = "\
SELECT json_extract(meta, '$._partition_key') AS key FROM jobs
WHERE queue = $1 AND state = 'available' AND json_extract(meta, '$._partition_key') IS NOT NULL
ORDER BY json_extract(meta, '$._partition_key') DESC
LIMIT 1";

const CLAIM_KEY: &str = claim_update!(
    "WHERE id IN (
    SELECT id FROM jobs
    WHERE state = 'available' AND queue = $1 AND json_extract(meta, '$._partition_key') IS NOT NULL
      AND json_extract(meta, '$._partition_key') = $5
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
    ORDER BY priority, scheduled_at, id
    LIMIT $2
)"
);

const CLAIM_UNKEYED: &str = claim_update!(
    "WHERE id IN (
    SELECT id FROM jobs
    WHERE state = 'available' AND queue = $1 AND json_extract(meta, '$._partition_key') IS NULL
      AND NOT EXISTS (SELECT 1 FROM job_queues q WHERE q.name = $1 AND q.paused)
    ORDER BY priority, scheduled_at, id
    LIMIT $2
)"
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
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_window: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    partition_turn: Option<String>,
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

/// What a claim is asked for, owned: it runs on the writer's thread.
pub(crate) struct ClaimRequest {
    queue: String,
    limit: usize,
    node: String,
    now: Option<chrono::DateTime<chrono::Utc>>,
    limited: bool,
    declared: DeclaredLimits,
    /// `params.ended` as JSON text (see [`ended_runs_json`]).
    ended: String,
}

impl ClaimRequest {
    /// The request of `params`.
    pub(crate) fn of(params: &jobs_driver::JobClaimParams<'_>) -> ClaimRequest {
        ClaimRequest {
            queue: params.queue.to_owned(),
            limit: params.limit,
            node: params.node.to_owned(),
            now: params.now,
            limited: params.limited,
            declared: params.declared,
            ended: ended_runs_json(params.ended),
        }
    }

    /// The claim, as the writer runs it. Its time is read once the write lock is this
    /// process's: read before, it would date the claim early by however long the lock
    /// took, and the rescuer's timeout would count from then.
    pub(crate) fn run(
        self,
    ) -> impl FnOnce(&mut SqliteConnection) -> Result<Vec<ClaimedJob>> + Send + 'static {
        move |conn| claim(conn, &self, crate::time::now_ms(self.now))
    }
}

/// Claims up to `limit` of the queue's jobs at `now_ms`, under its limits when `limited`
/// (see [`jobs_driver::JobClaimParams::limited`]).
fn claim(conn: &mut SqliteConnection, request: &ClaimRequest, now_ms: i64) -> Result<Vec<ClaimedJob>> {
    if !request.limited {
        return claim::claim(conn, &request.queue, request.limit, &request.node, now_ms);
    }
    let mut ops = Limited { conn, request, now_ms };
    run_ready(claim_limited(&mut ops, request.limit, &request.declared))
}

/// A limited claim's statements on the writer's connection.
struct Limited<'c, 'r> {
    conn: &'c mut SqliteConnection,
    request: &'r ClaimRequest,
    now_ms: i64,
}

impl Limited<'_, '_> {
    fn keys_now(&mut self, after: Option<&str>, until: Option<&str>, n: i64) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut last = after.unwrap_or("").to_owned();
        while i64::try_from(keys.len()).unwrap_or(i64::MAX) < n {
            let next: Vec<Key> = CachedQuery::new(NEXT_KEY)
                .bind::<Text, _>(&self.request.queue)
                .bind::<Text, _>(&last)
                .load(self.conn)?;
            let Some(Key { key }) = next.into_iter().next() else { break };
            if until.is_some_and(|u| key.as_str() > u) {
                break;
            }
            last.clone_from(&key);
            keys.push(key);
        }
        Ok(keys)
    }

    fn claim_now(&mut self, shares: &[Share]) -> Result<Vec<ClaimedJob>> {
        let r = self.request;
        let mut jobs = Vec::new();
        for share in shares {
            let statement = match &share.key {
                Some(_) => CLAIM_KEY,
                None => CLAIM_UNKEYED,
            };
            let rows: Vec<ClaimedRow> = CachedQuery::new(statement)
                .bind::<Text, _>(&r.queue)
                .bind::<BigInt, _>(share.take)
                .bind::<Text, _>(&r.node)
                .bind::<BigInt, _>(self.now_ms)
                .bind::<Nullable<Text>, _>(share.key.as_deref())
                .load(self.conn)?;
            jobs.extend(claim::decode(rows)?);
        }
        Ok(jobs)
    }

    fn lock_now(&mut self) -> Result<Option<StoredLimits>> {
        let rows: Vec<LimitsRow> =
            CachedQuery::new(READ_LIMITS).bind::<Text, _>(&self.request.queue).load(self.conn)?;
        Ok(rows.into_iter().next().map(|r| StoredLimits {
            global_limit: r.global_limit,
            per_key_limit: r.per_key_limit,
            rate_allowed: r.rate_allowed,
            rate_period_secs: r.rate_period_secs,
            per_key_rate_allowed: r.per_key_rate_allowed,
            per_key_rate_period_secs: r.per_key_rate_period_secs,
            rate_window: r.rate_window.map(from_ms),
            rate_counts: r.rate_counts,
            partition_turn: r.partition_turn,
            now: from_ms(self.now_ms),
        }))
    }

    fn running_now(&mut self, by_key: bool) -> Result<Vec<(Option<String>, i64)>> {
        let queue = self.request.queue.as_str();
        if !by_key {
            let counted: Vec<Count> = CachedQuery::new(COUNT_RUNNING)
                .bind::<Text, _>(queue)
                .bind::<Text, _>(&self.request.ended)
                .load(self.conn)?;
            return Ok(vec![(None, counted.iter().map(|c| c.n).next().unwrap_or(0))]);
        }
        let rows: Vec<KeyCount> = CachedQuery::new(RUNNING_BY_KEY)
            .bind::<Text, _>(queue)
            .bind::<Text, _>(&self.request.ended)
            .load(self.conn)?;
        Ok(rows.into_iter().map(|r| (r.key, r.n)).collect())
    }

    fn store_now(&mut self, usage: Option<&RateWindow>, turn: Option<&PartitionTurn>) -> Result<()> {
        CachedQuery::new(STORE)
            .bind::<Text, _>(&self.request.queue)
            .bind::<Nullable<BigInt>, _>(usage.map(|u| to_ms(u.start)))
            .bind::<Nullable<Text>, _>(usage.map(RateWindow::encode_counts))
            .bind::<Nullable<Text>, _>(turn.map(PartitionTurn::encode))
            .execute(self.conn)?;
        Ok(())
    }
}

impl KeyedClaimOps for Limited<'_, '_> {
    async fn keys(&mut self, after: Option<&str>, until: Option<&str>, n: i64) -> Result<Vec<String>> {
        self.keys_now(after, until, n)
    }

    async fn last_key(&mut self) -> Result<Option<String>> {
        let keys: Vec<Key> =
            CachedQuery::new(LAST_KEY).bind::<Text, _>(&self.request.queue).load(self.conn)?;
        Ok(keys.into_iter().next().map(|k| k.key))
    }

    async fn claim(&mut self, shares: &[Share]) -> Result<Vec<ClaimedJob>> {
        self.claim_now(shares)
    }

    async fn rate_blocked(&mut self, now: DateTime<Utc>) -> Result<i64> {
        key_rates::blocked(self.conn, &self.request.queue, now)
    }

    async fn key_rates(&mut self, keys: &[String]) -> Result<Vec<KeyRate>> {
        key_rates::read(self.conn, &self.request.queue, keys)
    }

    async fn store_key_rates(&mut self, rates: &[KeyRate], stale_before: DateTime<Utc>) -> Result<()> {
        key_rates::write(self.conn, &self.request.queue, rates, stale_before)
    }
}

impl LimitedClaimOps for Limited<'_, '_> {
    async fn lock_limits(&mut self) -> Result<Option<StoredLimits>> {
        self.lock_now()
    }

    async fn create_row(&mut self) -> Result<()> {
        CachedQuery::new(CREATE_ROW)
            .bind::<Text, _>(&self.request.queue)
            .bind::<BigInt, _>(self.now_ms)
            .execute(self.conn)?;
        Ok(())
    }

    async fn running(&mut self, by_key: bool) -> Result<Vec<(Option<String>, i64)>> {
        self.running_now(by_key)
    }

    async fn claim_plain(&mut self, limit: usize) -> Result<Vec<ClaimedJob>> {
        let r = self.request;
        claim::claim(self.conn, &r.queue, limit, &r.node, self.now_ms)
    }

    async fn store(&mut self, usage: Option<&RateWindow>, turn: Option<&PartitionTurn>) -> Result<()> {
        self.store_now(usage, turn)
    }
}
