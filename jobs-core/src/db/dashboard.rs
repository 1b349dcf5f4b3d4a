//! The dashboard's read models: filtered job lists with keyset pagination, counts that
//! stay fast on large tables (exact up to a cap, the planner's estimate beyond), the
//! overview's figures, and bulk actions in bounded batches.

use chrono::{DateTime, Utc};
use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Double, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::db::jobs::JobRow;
use crate::error::Result;
use crate::schema::jobs;
use crate::state::JobState;

diesel::define_sql_function! {
    /// The document the GIN search index covers: `{"args": args, "meta": meta}`.
    fn jobs_search_document(args: diesel::sql_types::Jsonb, meta: diesel::sql_types::Jsonb) -> diesel::sql_types::Jsonb;
}

/// The states the search index covers: a search without a state filter looks in these
/// (searching other states means choosing them, and scans newest first).
pub const SEARCHABLE_STATES: [JobState; 4] =
    [JobState::Scheduled, JobState::Retryable, JobState::Discarded, JobState::Cancelled];

/// What the jobs list shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    /// Any of these states (all when empty).
    pub states: Vec<JobState>,
    /// Exactly this queue.
    pub queue: Option<String>,
    /// Exactly this kind.
    pub kind: Option<String>,
    /// Having this tag.
    pub tag: Option<String>,
    /// Arguments or metadata containing this JSON (`@>`), e.g. `{"user_id": 7}`.
    pub search: Option<serde_json::Value>,
    /// Created at or after.
    pub from: Option<DateTime<Utc>>,
    /// Created before.
    pub to: Option<DateTime<Utc>>,
}

type Boxed<'a> = jobs::BoxedQuery<'a, Pg>;

/// The states `jobs_queue_state_idx` holds (its predicate lists them). Available and
/// running jobs are left out of it: every job passes through both, and an entry there
/// would cost each job two more index insertions on the hot path (docs/benchmarks.md).
/// A queue's available jobs are found through `jobs_claim_idx`, its running ones through
/// `jobs_running_idx`.
pub const QUEUE_INDEXED_STATES: [JobState; 5] =
    [JobState::Scheduled, JobState::Retryable, JobState::Completed, JobState::Discarded, JobState::Cancelled];

/// The condition "state is one of `states`", with the states as literals, not a bound
/// array: only then can the planner match the partial indexes (claim, due, running,
/// finalized, queue, search) that make state filters fast. The states
/// `jobs_queue_state_idx` holds form one `IN`; `available` and `running` are arms of
/// their own, so that a queue filter over several states reads three partial indexes
/// (a `BitmapOr`) rather than the whole table. The text comes from the closed `JobState`
/// enum alone.
fn states_in(states: &[JobState]) -> diesel::expression::SqlLiteral<diesel::sql_types::Bool> {
    let (indexed, own): (Vec<JobState>, Vec<JobState>) =
        states.iter().copied().partition(|s| QUEUE_INDEXED_STATES.contains(s));
    let mut arms = Vec::with_capacity(3);
    if !indexed.is_empty() {
        let list: Vec<String> = indexed.iter().map(|s| format!("'{}'", s.as_str())).collect();
        arms.push(format!("jobs.state IN ({})", list.join(", ")));
    }
    arms.extend(own.iter().map(|s| format!("jobs.state = '{}'", s.as_str())));
    if arms.is_empty() {
        arms.push("false".to_owned());
    }
    diesel::dsl::sql::<diesel::sql_types::Bool>(&format!("({})", arms.join(" OR ")))
}

fn filtered(filter: &JobFilter) -> Boxed<'_> {
    let mut q = jobs::table.into_boxed::<Pg>();
    if !filter.states.is_empty() {
        q = q.filter(states_in(&filter.states));
    }
    if let Some(queue) = &filter.queue {
        q = q.filter(jobs::queue.eq(queue));
        if filter.states.is_empty() && filter.search.is_none() {
            // Every state, spelled out so that a small queue is read through the indexes
            // that hold its rows (see `states_in`).
            q = q.filter(states_in(&JobState::ALL));
        }
    }
    if let Some(kind) = &filter.kind {
        q = q.filter(jobs::kind.eq(kind));
    }
    if let Some(tag) = &filter.tag {
        q = q.filter(jobs::tags.contains(vec![tag.clone()]));
    }
    if let Some(search) = &filter.search {
        if filter.states.is_empty() {
            q = q.filter(states_in(&SEARCHABLE_STATES));
        }
        let doc = jobs_search_document(jobs::args, jobs::meta);
        q = q.filter(doc.contains(serde_json::json!({ "args": search })).or(
            jobs_search_document(jobs::args, jobs::meta).contains(serde_json::json!({ "meta": search })),
        ));
    }
    if let Some(from) = filter.from {
        q = q.filter(jobs::created_at.ge(from));
    }
    if let Some(to) = filter.to {
        q = q.filter(jobs::created_at.lt(to));
    }
    q
}

/// The filter's rows older than `before`, newest first, at most `limit`.
fn page(filter: &JobFilter, before: Option<i64>, limit: i64) -> Boxed<'_> {
    let mut q = filtered(filter);
    if let Some(before) = before {
        q = q.filter(jobs::id.lt(before));
    }
    q.order(jobs::id.desc()).limit(limit)
}

/// A page of jobs, newest first, strictly older than `before` (an id) when given.
pub async fn list_jobs<C>(
    conn: &mut C,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(page(filter, before, limit).select(JobRow::as_select()).load(conn).await?)
}

/// A count: exact, or (past the cap) the planner's estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Counted.
    Exact(i64),
    /// More than the cap; the planner estimates this many.
    Estimate(i64),
}

impl Count {
    /// The number, exact or estimated.
    pub fn value(self) -> i64 {
        match self {
            Count::Exact(n) | Count::Estimate(n) => n,
        }
    }
}

/// Counts the jobs matching `filter`: exactly up to `cap`, otherwise estimated.
pub async fn count_jobs<C>(conn: &mut C, filter: &JobFilter, cap: i64) -> Result<Count>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let ids: Vec<i64> = filtered(filter).select(jobs::id).limit(cap + 1).load(conn).await?;
    let n = ids.len() as i64;
    if n <= cap {
        return Ok(Count::Exact(n));
    }
    let estimate = estimate_rows(conn, filter).await?.max(n);
    Ok(Count::Estimate(estimate))
}

#[derive(QueryableByName)]
struct Estimate {
    #[diesel(sql_type = Double)]
    rows: f64,
}

/// The planner's estimate of matching rows, from column statistics.
async fn estimate_rows<C>(conn: &mut C, filter: &JobFilter) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let states: Vec<String> = filter.states.iter().map(|s| s.as_str().to_owned()).collect();
    let row: Estimate = diesel::sql_query(ESTIMATE)
        .bind::<Array<Text>, _>(states)
        .bind::<Nullable<Text>, _>(filter.queue.as_deref())
        .bind::<Nullable<Text>, _>(filter.kind.as_deref())
        .bind::<Nullable<Text>, _>(filter.tag.as_deref())
        .bind::<Nullable<Jsonb>, _>(filter.search.as_ref())
        .bind::<Nullable<Timestamptz>, _>(filter.from)
        .bind::<Nullable<Timestamptz>, _>(filter.to)
        .get_result(conn)
        .await?;
    Ok(row.rows.round() as i64)
}

// Selectivity product from pg_stats, per filtered column, times the table's row estimate.
// (EXPLAIN cannot take bind parameters through the extended protocol reliably, and
// building its text would mean building SQL from strings.)
const ESTIMATE: &str = "\
WITH total AS (SELECT GREATEST(reltuples, 0)::float8 AS n FROM pg_class WHERE oid = 'jobs'::regclass),
freq AS (
    SELECT attname, vals, freqs FROM (
        SELECT attname, most_common_vals::text::text[] AS vals, most_common_freqs AS freqs
        FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'jobs'
          AND attname IN ('state', 'queue', 'kind')
    ) s
),
sel AS (
    SELECT
      CASE WHEN cardinality($1::text[]) = 0 THEN 1.0 ELSE COALESCE((
        SELECT sum(f) FROM freq, unnest(vals, freqs) AS u(v, f) WHERE attname = 'state' AND v = ANY ($1)), 0.0) END
    * CASE WHEN $2::text IS NULL THEN 1.0 ELSE COALESCE((
        SELECT f FROM freq, unnest(vals, freqs) AS u(v, f) WHERE attname = 'queue' AND v = $2), 0.01) END
    * CASE WHEN $3::text IS NULL THEN 1.0 ELSE COALESCE((
        SELECT f FROM freq, unnest(vals, freqs) AS u(v, f) WHERE attname = 'kind' AND v = $3), 0.01) END
    * CASE WHEN $4::text IS NULL THEN 1.0 ELSE 0.1 END
    * CASE WHEN $5::jsonb IS NULL THEN 1.0 ELSE 0.01 END
    * CASE WHEN $6::timestamptz IS NULL AND $7::timestamptz IS NULL THEN 1.0 ELSE 0.33 END AS s
)
SELECT (total.n * sel.s)::float8 AS rows FROM total, sel";

/// Jobs per state: exact up to `cap` each, estimated beyond.
pub async fn state_counts<C>(conn: &mut C, cap: i64) -> Result<Vec<(JobState, Count)>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let mut out = Vec::with_capacity(JobState::ALL.len());
    for state in JobState::ALL {
        let filter = JobFilter { states: vec![state], ..JobFilter::default() };
        out.push((state, count_jobs(conn, &filter, cap).await?));
    }
    Ok(out)
}

/// One queue's pending work, for the overview and queues pages.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
pub struct QueueDepth {
    /// Queue name.
    #[diesel(sql_type = Text)]
    pub queue: String,
    /// Available jobs.
    #[diesel(sql_type = BigInt)]
    pub available: i64,
    /// Scheduled jobs.
    #[diesel(sql_type = BigInt)]
    pub scheduled: i64,
    /// Running jobs.
    #[diesel(sql_type = BigInt)]
    pub running: i64,
    /// Retryable jobs.
    #[diesel(sql_type = BigInt)]
    pub retryable: i64,
    /// Seconds the oldest available job has waited (its latency).
    #[diesel(sql_type = Nullable<Double>)]
    pub oldest_available_secs: Option<f64>,
    /// Whether the queue is paused.
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub paused: bool,
}

// One arm per partial index (claim, due, running), so each reads only its own states.
const QUEUE_DEPTHS: &str = "\
WITH pending AS (
    SELECT queue, 'available'::job_state AS state, count(*) AS n, min(scheduled_at) AS oldest
    FROM jobs WHERE state = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, state, count(*), NULL FROM jobs WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
    UNION ALL
    SELECT queue, 'running'::job_state, count(*), NULL FROM jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT queue FROM pending
    UNION SELECT name FROM job_queues
    UNION SELECT jsonb_object_keys(queues) FROM job_nodes
)
SELECT names.queue,
       COALESCE(sum(n) FILTER (WHERE state = 'available'), 0)::int8 AS available,
       COALESCE(sum(n) FILTER (WHERE state = 'scheduled'), 0)::int8 AS scheduled,
       COALESCE(sum(n) FILTER (WHERE state = 'running'), 0)::int8 AS running,
       COALESCE(sum(n) FILTER (WHERE state = 'retryable'), 0)::int8 AS retryable,
       EXTRACT(EPOCH FROM now() - min(oldest))::float8 AS oldest_available_secs,
       COALESCE(bool_or(q.paused), false) AS paused
FROM names
LEFT JOIN pending ON pending.queue = names.queue
LEFT JOIN job_queues q ON q.name = names.queue
GROUP BY names.queue
ORDER BY names.queue";

/// Every queue with pending jobs, a stored setting, or a node running it: its pending
/// jobs per state, the age of its oldest available job, and its pause flag. Reads only
/// pending rows.
pub async fn queue_depths<C>(conn: &mut C) -> Result<Vec<QueueDepth>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(diesel::sql_query(QUEUE_DEPTHS).load(conn).await?)
}

/// Outcomes in one minute of the last hour.
#[derive(Debug, Clone, PartialEq, QueryableByName)]
pub struct Throughput {
    /// The minute.
    #[diesel(sql_type = Timestamptz)]
    pub minute: DateTime<Utc>,
    /// Jobs completed in it.
    #[diesel(sql_type = BigInt)]
    pub completed: i64,
    /// Failed attempts that will be retried.
    #[diesel(sql_type = BigInt)]
    pub retried: i64,
    /// Jobs discarded in it.
    #[diesel(sql_type = BigInt)]
    pub discarded: i64,
    /// Jobs cancelled in it.
    #[diesel(sql_type = BigInt)]
    pub cancelled: i64,
}

const THROUGHPUT: &str = "\
SELECT m.minute,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'completed'), 0)::int8 AS completed,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'retryable'), 0)::int8 AS retried,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'discarded'), 0)::int8 AS discarded,
       COALESCE(sum(s.count) FILTER (WHERE s.state = 'cancelled'), 0)::int8 AS cancelled
FROM generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()),
                     interval '1 minute') AS m(minute)
LEFT JOIN job_stats s ON s.bucket = m.minute
GROUP BY m.minute
ORDER BY m.minute";

/// Outcomes per minute over the last hour, from the counters the workers write with each
/// completion batch (`job_stats`): 60 small reads, whatever the size of `jobs`.
pub async fn throughput_last_hour<C>(conn: &mut C) -> Result<Vec<Throughput>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(diesel::sql_query(THROUGHPUT).load(conn).await?)
}

/// The ids of up to `limit` jobs matching `filter` with id below `before` (for bulk
/// actions, which walk the filter in bounded batches).
pub async fn matching_ids<C>(
    conn: &mut C,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(page(filter, before, limit).select(jobs::id).load(conn).await?)
}

/// The number of jobs in each (queue, state) pair, by queue then state. Counts every row
/// (a full scan on a large table: for the CLI's `stats`, not for a page that refreshes).
pub async fn counts_by_queue_and_state<C>(conn: &mut C) -> Result<Vec<(String, JobState, i64)>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(jobs::table
        .group_by((jobs::queue, jobs::state))
        .select((jobs::queue, jobs::state, diesel::dsl::count_star()))
        .order_by((jobs::queue, jobs::state))
        .load(conn)
        .await?)
}

#[cfg(test)]
mod tests {
    use diesel::sql_types::Text;
    use diesel::{QueryDsl, QueryableByName};
    use diesel_async::{AsyncPgConnection, RunQueryDsl};

    use super::{JobFilter, QUEUE_INDEXED_STATES, list_jobs, page};
    use crate::db::explain::explain_execute;
    use crate::db::jobs::{NewJob, insert_many};
    use crate::state::JobState;
    use crate::testing::TestDatabase;

    #[derive(QueryableByName)]
    struct Line {
        #[diesel(sql_type = Text)]
        line: String,
    }

    /// 20,000 completed jobs on a busy queue, then one job in each state on a small one.
    async fn a_small_queue_among_a_busy_one(db: &TestDatabase) -> AsyncPgConnection {
        let mut conn = db.connect().await.expect("connect");
        let busy: Vec<NewJob> = (0..5_000).map(|_| NewJob::new("plan.job", "busy", "{}")).collect();
        for _ in 0..4 {
            insert_many(&mut conn, &busy, None).await.expect("insert");
        }
        let small: Vec<NewJob> =
            JobState::ALL.iter().map(|_| NewJob::new("plan.job", "small", "{}")).collect();
        insert_many(&mut conn, &small, None).await.expect("insert");
        // Move the rows into their states the way the components would have left them.
        diesel::sql_query(
            "UPDATE jobs SET state = 'completed', attempt = 1, attempted_at = now(), finalized_at = now()
             WHERE queue = 'busy'",
        )
        .execute(&mut conn)
        .await
        .expect("complete");
        diesel::sql_query(
            "UPDATE jobs SET state = s.state, attempt = 1, attempted_at = now(),
                    finalized_at = CASE WHEN s.state IN ('completed', 'discarded', 'cancelled') THEN now() END
             FROM (SELECT id, (enum_range(NULL::job_state))[row_number() OVER (ORDER BY id)] AS state
                   FROM jobs WHERE queue = 'small') AS s
             WHERE jobs.id = s.id",
        )
        .execute(&mut conn)
        .await
        .expect("spread");
        diesel::sql_query("VACUUM ANALYZE jobs").execute(&mut conn).await.expect("analyze");
        conn
    }

    /// The plan of the jobs page for `filter`, as `EXPLAIN` prints it.
    async fn page_plan(conn: &mut AsyncPgConnection, filter: &JobFilter, name: &str) -> String {
        let query = page(filter, None, 50).select(crate::schema::jobs::id);
        let sql = diesel::debug_query::<diesel::pg::Pg, _>(&query).to_string();
        let sql = sql.split(" -- binds:").next().unwrap_or_default().to_owned();
        diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(conn).await.expect("prepare");
        let queue = filter.queue.as_deref().unwrap_or_default();
        explain_execute(conn, &format!("{name}('{queue}', 50)")).await
    }

    /// The queue index leaves out available and running jobs; a small queue's page, in
    /// every state or in some, must still be read through indexes, never by walking the
    /// whole table, and must list the jobs in every state.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_queue_is_read_through_its_indexes_in_every_state() {
        let db = TestDatabase::new().await.expect("database");
        let mut conn = a_small_queue_among_a_busy_one(&db).await;
        let every = JobFilter { queue: Some("small".into()), ..JobFilter::default() };
        let listed = list_jobs(&mut conn, &every, None, 50).await.expect("list");
        let mut states: Vec<JobState> = listed.iter().map(|j| j.state).collect();
        states.sort_by_key(|s| s.as_str());
        let mut all = JobState::ALL.to_vec();
        all.sort_by_key(|s| s.as_str());
        assert_eq!(states, all);

        let some = JobFilter {
            queue: Some("small".into()),
            states: vec![JobState::Available, JobState::Completed, JobState::Running],
            ..JobFilter::default()
        };
        for (name, filter) in [("every_state", &every), ("some_states", &some)] {
            let plan = page_plan(&mut conn, filter, name).await;
            assert!(
                !plan.contains("Seq Scan")
                    && !plan.contains("jobs_pkey")
                    && plan.contains("jobs_queue_state_idx"),
                "{name}:\n{plan}"
            );
        }
    }

    /// `QUEUE_INDEXED_STATES` is what the migration's index holds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_queue_index_holds_the_states_the_dashboard_expects() {
        let db = TestDatabase::new().await.expect("database");
        let mut conn = db.connect().await.expect("connect");
        let def: Line = diesel::sql_query(
            "SELECT indexdef AS line FROM pg_indexes WHERE indexname = 'jobs_queue_state_idx' AND schemaname = current_schema()",
        )
        .get_result(&mut conn)
        .await
        .expect("index");
        for state in JobState::ALL {
            let quoted = format!("'{}'", state.as_str());
            assert_eq!(
                def.line.contains(&quoted),
                QUEUE_INDEXED_STATES.contains(&state),
                "{state:?} in {}",
                def.line
            );
        }
    }
}
