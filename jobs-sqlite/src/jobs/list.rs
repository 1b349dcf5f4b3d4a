//! Selections of jobs for the dashboard and the CLI: filtered lists with keyset pages, and
//! counts, exact up to a cap (SQLite keeps no statistics to estimate from).

use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{Count, JobFilter, JobOrder, JobRow, JobState, Result};

use super::read::{JOB_COLUMNS, StoredJob, into_rows};
use crate::rows::{Count as CountRow, Id};
use crate::time::to_ms;

type Query = diesel::query_builder::BoxedSqlQuery<'static, Sqlite, diesel::query_builder::SqlQuery>;

/// `{head} SELECT {what} FROM jobs WHERE …` for `filter`, with its values bound. State names
/// are written as literals (they come from the closed `JobState` enum), so that SQLite
/// can match the partial indexes whose predicates name them.
fn filtered(head: &str, what: &str, filter: &JobFilter) -> Query {
    let mut q = diesel::sql_query(format!("{head}SELECT {what} FROM jobs WHERE true")).into_boxed::<Sqlite>();
    if !filter.states.is_empty() {
        q = q.sql(states_in(filter));
    }
    if let Some(queue) = &filter.queue {
        q = q.sql(" AND queue = ?").bind::<Text, _>(queue.clone());
    }
    if let Some(kind) = &filter.kind {
        q = q.sql(" AND kind = ?").bind::<Text, _>(kind.clone());
    }
    if let Some(workflow) = filter.workflow {
        q = q.sql(" AND workflow_id = ?").bind::<diesel::sql_types::BigInt, _>(workflow);
    }
    if let Some(tag) = &filter.tag {
        q = q
            .sql(" AND EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE value = ?)")
            .bind::<Text, _>(tag.clone());
    }
    if let Some(search) = &filter.search {
        let search = search.to_string();
        q = q
            .sql(" AND (jobs_json_contains(args, ?) OR jobs_json_contains(meta, ?))")
            .bind::<Text, _>(search.clone())
            .bind::<Text, _>(search);
    }
    if let Some(text) = &filter.error {
        let pattern = jobs_driver::like_pattern(text);
        q = q
            .sql(
                " AND EXISTS (SELECT 1 FROM json_each(jobs.errors) AS e \
                 WHERE json_extract(e.value, '$.message') LIKE ? ESCAPE '\\' \
                    OR json_extract(e.value, '$.error_type') LIKE ? ESCAPE '\\')",
            )
            .bind::<Text, _>(pattern.clone())
            .bind::<Text, _>(pattern);
    }
    if let Some(floor) = filter.id_at_least {
        q = q.sql(" AND id >= ?").bind::<BigInt, _>(floor);
    }
    if let Some(from) = filter.from {
        q = q.sql(" AND created_at >= ?").bind::<BigInt, _>(to_ms(from));
    }
    if let Some(to) = filter.to {
        q = q.sql(" AND created_at < ?").bind::<BigInt, _>(to_ms(to));
    }
    q
}

/// The states `jobs_queue_state_idx` holds (its predicate, verbatim).
const QUEUE_INDEXED: [JobState; 5] =
    [JobState::Scheduled, JobState::Retryable, JobState::Completed, JobState::Discarded, JobState::Cancelled];

/// ` AND state IN (…)` for `states`, plus the terms of the partial indexes that hold
/// them: SQLite uses a partial index only when the query repeats its WHERE term, so a
/// filter on the states a partial index holds says so in the index's own words
/// (`jobs_queue_state_idx`, `jobs_finalized_idx`; a lone `available` or `running` is an
/// equality, as `jobs_claim_idx` and `jobs_running_idx` have it). The text comes from the
/// closed `JobState` enum alone.
///
/// Except for completed jobs in id order, but for one queue's (which `jobs_queue_state_idx`
/// holds in id order): this table keeps every finished job, so completed ones are most of
/// it, and reading it by id finds a page (or a capped count) in the first rows; through
/// `jobs_finalized_idx` SQLite would sort every completed job first (0.86 s for a page at
/// 1 M jobs, docs/benchmarks.md). The unary `+` keeps the planner off the state indexes.
fn states_in(filter: &JobFilter) -> String {
    let states = &filter.states[..];
    let quoted = |states: &[JobState]| {
        states.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ")
    };
    let by_id = matches!(filter.order, JobOrder::NewestFirst | JobOrder::OldestFirst);
    if by_id && filter.queue.is_none() && states.contains(&JobState::Completed) {
        return format!(" AND +state IN ({})", quoted(states));
    }
    let mut sql = match states {
        [one @ (JobState::Pending | JobState::Available | JobState::Running)] => {
            format!(" AND state = '{}'", one.as_str())
        }
        _ => format!(" AND state IN ({})", quoted(states)),
    };
    if states.iter().all(|s| QUEUE_INDEXED.contains(s)) {
        sql.push_str(&format!(" AND state IN ({})", quoted(&QUEUE_INDEXED)));
    }
    if states.iter().all(|s| s.is_final()) {
        sql.push_str(" AND finalized_at IS NOT NULL");
    }
    sql
}

/// Where a page starts: after job `id`, at its time `at` in a time order (`None`: by id
/// alone, as when the cursor job is gone or no longer has that time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor {
    id: i64,
    at: Option<i64>,
}

#[derive(QueryableByName)]
struct At {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    at: Option<i64>,
}

/// The time column of `filter`'s order, if it is a time order.
fn time_column(filter: &JobFilter) -> Option<&'static str> {
    match filter.order {
        JobOrder::NewestFirst | JobOrder::OldestFirst => None,
        JobOrder::DueSoonest => Some("scheduled_at"),
        JobOrder::RecentlyFinished => Some("finalized_at"),
    }
}

/// The cursor for `before`: the job's time read from its row first, so that a page after a
/// job pruned meanwhile goes on from its id rather than coming back empty.
fn cursor(conn: &mut SqliteConnection, filter: &JobFilter, before: Option<i64>) -> Result<Option<Cursor>> {
    let Some(id) = before else { return Ok(None) };
    let at = match time_column(filter) {
        None => None,
        Some(column) => diesel::sql_query(format!("SELECT {column} AS at FROM jobs WHERE id = ?"))
            .bind::<BigInt, _>(id)
            .load::<At>(conn)?
            .into_iter()
            .next()
            .and_then(|r| r.at),
    };
    Ok(Some(Cursor { id, at }))
}

/// The filter's rows after `cursor` in its order, at most `limit`.
fn page(what: &str, filter: &JobFilter, cursor: Option<Cursor>, limit: i64) -> Query {
    let mut q = filtered("", what, filter);
    let descending = filter.order.descending();
    let op = if descending { "<" } else { ">" };
    if let Some(Cursor { id, at }) = cursor {
        q = match (time_column(filter), at) {
            (Some(column), Some(at)) => {
                q.sql(format!(" AND ({column}, id) {op} (?, ?)")).bind::<BigInt, _>(at).bind::<BigInt, _>(id)
            }
            _ => q.sql(format!(" AND id {op} ?")).bind::<BigInt, _>(id),
        };
    }
    let order = match filter.order {
        JobOrder::NewestFirst => " ORDER BY id DESC LIMIT ?",
        JobOrder::OldestFirst => " ORDER BY id ASC LIMIT ?",
        JobOrder::DueSoonest => " ORDER BY scheduled_at ASC, id ASC LIMIT ?",
        JobOrder::RecentlyFinished => {
            " AND finalized_at IS NOT NULL ORDER BY finalized_at DESC, id DESC LIMIT ?"
        }
    };
    q.sql(order).bind::<BigInt, _>(limit)
}

/// The text of a page's statement (`?` parameters), for the plan tests.
#[cfg(test)]
pub(crate) fn page_sql(filter: &JobFilter) -> String {
    let cursor = Cursor { id: 1, at: Some(0) };
    let text = diesel::debug_query::<Sqlite, _>(&page("id", filter, Some(cursor), 50)).to_string();
    text.split(" -- binds:").next().unwrap_or_default().to_owned()
}

/// A page of jobs in the filter's order, after the job `before` when given.
pub(crate) fn list(
    conn: &mut SqliteConnection,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<JobRow>> {
    let cursor = cursor(conn, filter, before)?;
    let rows: Vec<StoredJob> = page(JOB_COLUMNS, filter, cursor, limit).load(conn)?;
    into_rows(rows)
}

/// The ids of up to `limit` jobs matching `filter` after `before` (for bulk actions,
/// which walk the filter in bounded batches).
pub(crate) fn list_ids(
    conn: &mut SqliteConnection,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<i64>> {
    let cursor = cursor(conn, filter, before)?;
    let rows: Vec<Id> = page("id", filter, cursor, limit).load(conn)?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Counts the jobs matching `filter`: exactly up to `cap`; past it, only that there are
/// more (`AtLeast`).
pub(crate) fn count(conn: &mut SqliteConnection, filter: &JobFilter, cap: i64) -> Result<Count> {
    let row: CountRow = filtered("SELECT count(*) AS n FROM (", "1", filter)
        .sql(" LIMIT ?)")
        .bind::<BigInt, _>(cap.saturating_add(1))
        .get_result(conn)?;
    Ok(if row.n > cap { Count::AtLeast(cap) } else { Count::Exact(row.n) })
}

#[derive(QueryableByName)]
struct PairRow {
    #[diesel(sql_type = Text)]
    queue: String,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The number of jobs in each (queue, state) pair, by queue then state (in the order of
/// [`JobState::ALL`]). Counts every row: for the CLI's `stats`.
pub(crate) fn counts_by_queue_and_state(conn: &mut SqliteConnection) -> Result<Vec<(String, JobState, i64)>> {
    let rows: Vec<PairRow> =
        diesel::sql_query("SELECT queue, state, count(*) AS n FROM jobs GROUP BY queue, state").load(conn)?;
    let mut counts = rows
        .into_iter()
        .map(|r| {
            let state = r
                .state
                .parse::<JobState>()
                .map_err(|e| jobs_driver::DriverError::unexpected(e.to_string()))?;
            Ok((r.queue, state, r.n))
        })
        .collect::<Result<Vec<_>>>()?;
    counts.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    Ok(counts)
}
