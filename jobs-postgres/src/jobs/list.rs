//! Selections of jobs for the dashboard and the CLI: filtered lists with keyset pages,
//! and counts that stay fast on large tables (exact up to a cap, the planner's estimate
//! beyond).

use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{Array, Bool, Double, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Count, JobFilter, JobState, Result};

use crate::schema::jobs_all;

diesel::define_sql_function! {
    /// The document the GIN search index covers: `{"args": args, "meta": meta}`.
    fn jobs_search_document(args: diesel::sql_types::Jsonb, meta: diesel::sql_types::Jsonb) -> diesel::sql_types::Jsonb;
}

/// The states the search index (`jobs_search_idx`) covers: a search among these states
/// reads the index; any other search tests rows newest first (the dashboard bounds it to
/// a window of ids).
pub(crate) const SEARCHABLE_STATES: [JobState; 4] = jobs_driver::INDEXED_SEARCH_STATES;

type Boxed<'a> = jobs_all::BoxedQuery<'a, Pg>;

/// The states `jobs_queue_state_idx` holds (its predicate lists them). Available and
/// running jobs are left out of it: every job passes through both, and an entry there
/// would cost each job two more index insertions on the hot path (docs/benchmarks.md).
/// A queue's available jobs are found through `jobs_claim_idx`, its running ones through
/// `jobs_running_idx`.
pub(crate) const QUEUE_INDEXED_STATES: [JobState; 5] =
    [JobState::Scheduled, JobState::Retryable, JobState::Completed, JobState::Discarded, JobState::Cancelled];

/// The condition "state is one of `states`", with the states as literals, not a bound
/// array: only then can the planner match the partial indexes (claim, due, running,
/// finalized, queue, search) that make state filters fast. The states
/// `jobs_queue_state_idx` holds form one `IN`; `available` and `running` are arms of
/// their own, so that a queue filter over several states reads three partial indexes
/// (a `BitmapOr`) rather than the whole table. The text comes from the closed `JobState`
/// enum alone.
fn states_in(states: &[JobState]) -> diesel::expression::SqlLiteral<diesel::sql_types::Bool> {
    diesel::dsl::sql::<diesel::sql_types::Bool>(&states_sql(states))
}

/// The text of [`states_in`].
fn states_sql(states: &[JobState]) -> String {
    let (indexed, own): (Vec<JobState>, Vec<JobState>) =
        states.iter().copied().partition(|s| QUEUE_INDEXED_STATES.contains(s));
    let mut arms = Vec::with_capacity(3);
    if !indexed.is_empty() {
        let list: Vec<String> = indexed.iter().map(|s| format!("'{}'", s.as_str())).collect();
        arms.push(format!("jobs_all.state IN ({})", list.join(", ")));
    }
    arms.extend(own.iter().map(|s| format!("jobs_all.state = '{}'", s.as_str())));
    if arms.is_empty() {
        arms.push("false".to_owned());
    }
    format!("({})", arms.join(" OR "))
}

pub(crate) fn filtered(filter: &JobFilter) -> Boxed<'_> {
    let mut q = jobs_all::table.into_boxed::<Pg>();
    if !filter.states.is_empty() {
        q = q.filter(states_in(&filter.states));
    }
    if let Some(queue) = &filter.queue {
        q = q.filter(jobs_all::queue.eq(queue));
        if filter.states.is_empty() && filter.search.is_none() {
            // Every state, spelled out so that a small queue is read through the indexes
            // that hold its rows (see `states_in`).
            q = q.filter(states_in(&JobState::ALL));
        }
    }
    if let Some(kind) = &filter.kind {
        q = q.filter(jobs_all::kind.eq(kind));
    }
    if let Some(tag) = &filter.tag {
        // The second term is implied by the first, and written out (as a literal) so that
        // the planner can use `jobs_archive_tags_idx`, which holds tagged jobs only.
        q = q
            .filter(jobs_all::tags.contains(vec![tag.clone()]))
            .filter(diesel::dsl::sql::<Bool>("jobs_all.tags <> '{}'"));
    }
    if let Some(search) = &filter.search {
        let indexed =
            !filter.states.is_empty() && filter.states.iter().all(|s| SEARCHABLE_STATES.contains(s));
        if indexed {
            // The form `jobs_search_idx` holds.
            let doc = jobs_search_document(jobs_all::args, jobs_all::meta);
            q = q.filter(
                doc.contains(serde_json::json!({ "args": search })).or(jobs_search_document(
                    jobs_all::args,
                    jobs_all::meta,
                )
                .contains(serde_json::json!({ "meta": search }))),
            );
        } else {
            // No index holds these states: each row is tested, so test the columns
            // themselves (a third of the cost of building the document per row).
            q = q.filter(jobs_all::args.contains(search.clone()).or(jobs_all::meta.contains(search.clone())));
        }
    }
    if let Some(text) = &filter.error {
        let pattern = jobs_driver::like_pattern(text);
        q = q.filter(
            diesel::dsl::sql::<Bool>(
                "EXISTS (SELECT 1 FROM jsonb_array_elements(jobs_all.errors) AS e WHERE e ->> 'message' ILIKE ",
            )
            .bind::<Text, _>(pattern.clone())
            .sql(" OR e ->> 'error_type' ILIKE ")
            .bind::<Text, _>(pattern)
            .sql(")"),
        );
    }
    if let Some(floor) = filter.id_at_least {
        q = q.filter(jobs_all::id.ge(floor));
    }
    if !filter.states.is_empty() && filter.states.iter().all(|s| s.is_final()) {
        // Implied by the states; written out so that `jobs_finalized_idx` (state,
        // finalized_at) can serve the filter: 10,001 discarded rows of 5 M are counted
        // in 3 ms through it, against 87 ms scanning the table for them.
        q = q.filter(jobs_all::finalized_at.is_not_null());
    }
    if let Some(from) = filter.from {
        q = q.filter(jobs_all::created_at.ge(from));
    }
    if let Some(to) = filter.to {
        q = q.filter(jobs_all::created_at.lt(to));
    }
    q
}

/// Counts the jobs matching `filter`: exactly up to `cap`; past it, the planner's estimate
/// when `estimate`, else only that there are more (`AtLeast`).
pub(crate) async fn count<C>(conn: &mut C, filter: &JobFilter, cap: i64, estimate: bool) -> Result<Count>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    if let Some(count) = count_finished_states(conn, filter, cap).await? {
        return Ok(count);
    }
    // Counting a created-at window up to the cap reads that many entries of
    // `jobs_created_idx`, and a row each when other filters apply. The histogram's
    // estimate of a window is close (within 4 % measured at 5 M jobs), so when it is far
    // past the cap, it is the answer.
    if estimate
        && (filter.from.is_some() || filter.to.is_some())
        && filter.search.is_none()
        && filter.error.is_none()
        && filter.id_at_least.is_none()
    {
        let estimated = estimate_rows(conn, filter).await?;
        if estimated > cap.saturating_mul(4) {
            return Ok(Count::Estimate(estimated));
        }
    }
    let ids: Vec<i64> = filtered(filter).select(jobs_all::id).limit(cap + 1).load(conn).await?;
    let n = ids.len() as i64;
    if n <= cap {
        return Ok(Count::Exact(n));
    }
    // Nothing estimates text in errors or an id window: say only that there are more.
    if !estimate || filter.error.is_some() || filter.id_at_least.is_some() {
        return Ok(Count::AtLeast(cap));
    }
    let estimate = estimate_rows(conn, filter).await?.max(n);
    Ok(Count::Estimate(estimate))
}

/// Finished states alone are counted exactly up to this many (or the caller's cap, if
/// larger): an index-only scan of `jobs_finalized_idx`, 15–50 ms for 200,000 rows of 5 M.
/// Rarer states are where the planner's sampled statistics err most (±13 % for a 1 %
/// state in one measured `ANALYZE`).
pub(crate) const FINISHED_EXACT_UP_TO: i64 = 200_000;

/// The count of a filter on finished states and nothing else, exact up to
/// [`FINISHED_EXACT_UP_TO`]; `None` for any other filter.
async fn count_finished_states<C>(conn: &mut C, filter: &JobFilter, cap: i64) -> Result<Option<Count>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let only_states =
        JobFilter { states: filter.states.clone(), order: filter.order, ..JobFilter::default() };
    if filter.states.is_empty() || !filter.states.iter().all(|s| s.is_final()) || *filter != only_states {
        return Ok(None);
    }
    let cap = cap.max(FINISHED_EXACT_UP_TO);
    let row: crate::rows::Count = diesel::sql_query(format!(
        "SELECT count(*) AS n FROM (SELECT 1 FROM jobs_all WHERE {} AND finalized_at IS NOT NULL LIMIT $1) AS t",
        states_sql(&filter.states)
    ))
    .bind::<diesel::sql_types::BigInt, _>(cap + 1)
    .get_result(conn)
    .await?;
    if row.n <= cap {
        return Ok(Some(Count::Exact(row.n)));
    }
    Ok(Some(Count::Estimate(estimate_rows(conn, filter).await?.max(row.n))))
}

#[derive(QueryableByName)]
struct Estimate {
    #[diesel(sql_type = Double)]
    rows: f64,
}

/// The planner's estimate of matching rows, from column statistics: the sum of its
/// estimates for `jobs` and for `jobs_archive`.
async fn estimate_rows<C>(conn: &mut C, filter: &JobFilter) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let states: Vec<String> = filter.states.iter().map(|s| s.as_str().to_owned()).collect();
    let mut total = 0.0;
    for table in ["jobs", "jobs_archive"] {
        let row: Estimate = diesel::sql_query(ESTIMATE)
            .bind::<Array<Text>, _>(&states)
            .bind::<Nullable<Text>, _>(filter.queue.as_deref())
            .bind::<Nullable<Text>, _>(filter.kind.as_deref())
            .bind::<Nullable<Text>, _>(filter.tag.as_deref())
            .bind::<Nullable<Jsonb>, _>(filter.search.as_ref())
            .bind::<Nullable<Timestamptz>, _>(filter.from)
            .bind::<Nullable<Timestamptz>, _>(filter.to)
            .bind::<Text, _>(table)
            .get_result(conn)
            .await?;
        total += row.rows;
    }
    Ok(total.round() as i64)
}

// Selectivity product from pg_stats, per filtered column, times the row estimate of the
// table named by $8.
// (EXPLAIN cannot take bind parameters through the extended protocol reliably, and
// building its text would mean building SQL from strings.)
// - state, queue, kind: the value's frequency among the most common values; for a value
//   not among them, what those leave (less NULLs) shared evenly by the other distinct
//   values, as the planner reckons it (a kind of 120 is 0.8 %, not the 1 % a fixed guess
//   said: 20 % off at 5 M jobs);
// - tag: the element's frequency among `tags`' most common elements (half the rarest
//   listed frequency when it is not one of them);
// - a created_at window: the share of `created_at`'s histogram buckets inside it;
// - a search: 1 % (nothing estimates containment).
// A column without statistics (a table never analyzed, or empty) falls back to fixed
// shares; only `created_at`'s histogram is cast to timestamps (another column's bounds,
// the tag arrays' say, are no timestamps).
const ESTIMATE: &str = "\
WITH total AS (SELECT GREATEST(reltuples, 0)::float8 AS n FROM pg_class WHERE oid = $8::regclass),
stats AS (
    SELECT attname, most_common_vals::text::text[] AS vals, most_common_freqs AS freqs,
           most_common_elems::text::text[] AS elems, most_common_elem_freqs AS elem_freqs,
           CASE WHEN attname = 'created_at' THEN histogram_bounds::text::timestamptz[] END AS bounds,
           null_frac::float8 AS null_frac, n_distinct::float8 AS n_distinct
    FROM pg_stats WHERE schemaname = current_schema() AND tablename = $8
      AND attname IN ('state', 'queue', 'kind', 'tags', 'created_at')
),
rare AS (
    SELECT attname,
           GREATEST(1.0 - COALESCE((SELECT sum(f) FROM unnest(freqs) AS f), 0.0) - null_frac, 0.0)
           / GREATEST(CASE WHEN n_distinct < 0 THEN -n_distinct * (SELECT n FROM total) ELSE n_distinct END
                      - COALESCE(cardinality(vals), 0), 1.0) AS f
    FROM stats
),
sel AS (
    SELECT
      CASE WHEN cardinality($1::text[]) = 0 THEN 1.0 ELSE (
        SELECT COALESCE(sum(COALESCE(
                 (SELECT f FROM stats, unnest(vals, freqs) AS u(v, f) WHERE attname = 'state' AND v = one),
                 (SELECT f FROM rare WHERE attname = 'state'), 0.0)), 0.0)
        FROM unnest($1::text[]) AS one) END
    * CASE WHEN $2::text IS NULL THEN 1.0 ELSE COALESCE(
        (SELECT f FROM stats, unnest(vals, freqs) AS u(v, f) WHERE attname = 'queue' AND v = $2),
        (SELECT f FROM rare WHERE attname = 'queue'), 0.01) END
    * CASE WHEN $3::text IS NULL THEN 1.0 ELSE COALESCE(
        (SELECT f FROM stats, unnest(vals, freqs) AS u(v, f) WHERE attname = 'kind' AND v = $3),
        (SELECT f FROM rare WHERE attname = 'kind'), 0.01) END
    * CASE WHEN $4::text IS NULL THEN 1.0 ELSE COALESCE(
        (SELECT f FROM stats, unnest(elems, elem_freqs[1:cardinality(elems)]) AS u(v, f)
         WHERE attname = 'tags' AND v = $4),
        (SELECT elem_freqs[cardinality(elems) + 1] / 2 FROM stats WHERE attname = 'tags'),
        0.0001) END
    * CASE WHEN $5::jsonb IS NULL THEN 1.0 ELSE 0.01 END
    * CASE WHEN $6::timestamptz IS NULL AND $7::timestamptz IS NULL THEN 1.0 ELSE COALESCE((
        SELECT GREATEST(count(*) FILTER (WHERE b >= COALESCE($6, '-infinity') AND b < COALESCE($7, 'infinity')), 0.5)::float8
               / GREATEST(cardinality(bounds) - 1, 1)
        FROM stats, unnest(bounds) AS b WHERE attname = 'created_at' GROUP BY bounds), 0.33) END AS s
)
SELECT (total.n * sel.s)::float8 AS rows FROM total, sel";

/// The number of jobs in each (queue, state) pair, by queue then state. Counts every row
/// (a full scan on a large table: for the CLI's `stats`, not for a page that refreshes).
pub(crate) async fn counts_by_queue_and_state<C>(conn: &mut C) -> Result<Vec<(String, JobState, i64)>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    Ok(jobs_all::table
        .group_by((jobs_all::queue, jobs_all::state))
        .select((jobs_all::queue, jobs_all::state, diesel::dsl::count_star()))
        .order_by((jobs_all::queue, jobs_all::state))
        .load(conn)
        .await?)
}
