//! Selections of jobs for the dashboard and the CLI: filtered lists with keyset pages,
//! and counts that stay fast on large tables (exact up to a cap, the planner's estimate
//! beyond).

use std::time::{Duration, Instant};

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::result::DatabaseErrorKind;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncConnection, AsyncConnectionCore, AsyncPgConnection, RunQueryDsl};
use jobs_driver::{Count, DriverError, JobFilter, JobState, Result};

use super::estimate::estimate_rows;
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
    if let Some(workflow) = filter.workflow {
        q = q.filter(jobs_all::workflow_id.eq(workflow));
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

/// How long a count may take to be exact: past it, the count is the planner's estimate.
/// Counting exactly up to the cap reads a row for each job a filter passes over, and a
/// filter no index serves (a kind of 120 among completed jobs, a kind in a created window)
/// passes over a million rows of 5 M before it has 10,000 (0.2-0.6 s); the estimate takes
/// 1 ms. The dashboard's pages aim at 200 ms.
pub(crate) const COUNT_BUDGET: Duration = Duration::from_millis(100);

/// Counts the jobs matching `filter`: exactly up to `cap`; past it, the planner's estimate
/// when `estimate`, else only that there are more (`AtLeast`). With `estimate`, a count
/// that would take more than [`COUNT_BUDGET`] is the estimate too.
pub(crate) async fn count(
    conn: &mut AsyncPgConnection,
    filter: &JobFilter,
    cap: i64,
    estimate: bool,
) -> Result<Count> {
    count_within(conn, filter, cap, estimate, COUNT_BUDGET).await
}

/// [`count`], its exact count given `budget` (the tests shorten it).
pub(crate) async fn count_within(
    conn: &mut AsyncPgConnection,
    filter: &JobFilter,
    cap: i64,
    estimate: bool,
    budget: Duration,
) -> Result<Count> {
    if let Some(count) = count_finished_states(conn, filter, cap).await? {
        return Ok(count);
    }
    // Estimated when the count would be slow: not text in errors or an id window, which
    // nothing estimates, nor a search, estimated by a guess (its count reads an index).
    let estimable =
        estimate && filter.search.is_none() && filter.error.is_none() && filter.id_at_least.is_none();
    // Counting a created-at window up to the cap reads that many entries of
    // `jobs_created_idx`, and a row each when other filters apply. The histogram's
    // estimate of a window is close (within 4 % measured at 5 M jobs), so when it is far
    // past the cap, it is the answer.
    if estimable && (filter.from.is_some() || filter.to.is_some()) {
        let estimated = estimate_rows(conn, filter).await?;
        if estimated > cap.saturating_mul(4) {
            return Ok(Count::Estimate(estimated));
        }
    }
    let query = filtered(filter).select(jobs_all::id).limit(cap + 1);
    let n = if estimable {
        let started = Instant::now();
        let within = conn
            .transaction::<_, DriverError, _>(async |tx| {
                // Undone by a rollback (to the savepoint, inside an operation's own
                // transaction), and set back after a count in time: `SET LOCAL` outlives a
                // released savepoint.
                diesel::sql_query(format!("SET LOCAL statement_timeout = {}", budget.as_millis().max(1)))
                    .execute(tx)
                    .await?;
                let ids: Vec<i64> = query.load(tx).await?;
                diesel::sql_query("SET LOCAL statement_timeout TO DEFAULT").execute(tx).await?;
                Ok(ids.len() as i64)
            })
            .await;
        match within {
            Ok(n) => n,
            // Cancelled at the budget. The server's message is in its own language and
            // diesel keeps no SQLSTATE, so a statement error counts as the timeout when it
            // came at the budget; any other error is the caller's.
            Err(DriverError::Database(diesel::result::Error::DatabaseError(
                DatabaseErrorKind::Unknown,
                info,
            ))) if started.elapsed() >= budget.mul_f64(0.9) => {
                tracing::debug!(error = info.message(), "a count past its budget answers the estimate");
                return Ok(Count::Estimate(estimate_rows(conn, filter).await?));
            }
            Err(e) => return Err(e),
        }
    } else {
        let ids: Vec<i64> = query.load(conn).await?;
        ids.len() as i64
    };
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
