//! Selections of jobs for the dashboard and the CLI: filtered lists with keyset pages, and
//! counts, exact up to a cap.
//!
//! A search narrows rows with `JSON_CONTAINS`, which is looser than Postgres's `jsonb @>`
//! (a scalar matches an array holding it at any depth); the rows it keeps are checked
//! again in Rust with `jobs_driver::json_contains`, the one definition of containment,
//! and a page that lost rows to the check is topped up from the rows after it.

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Count, JobFilter, JobOrder, JobRow, JobState, Result};

use super::read::{StoredJob, into_rows, job_columns, state};
use crate::rows::Count as CountRow;
use crate::time::naive;

type Query = diesel::query_builder::BoxedSqlQuery<'static, Mysql, diesel::query_builder::SqlQuery>;

/// `{head}SELECT {what} FROM jobs WHERE …` for `filter`, with its values bound. State
/// names are written as literals (they come from the closed `JobState` enum).
fn filtered(head: &str, what: &str, filter: &JobFilter) -> Query {
    let mut q = diesel::sql_query(format!("{head}SELECT {what} FROM jobs WHERE true")).into_boxed::<Mysql>();
    if !filter.states.is_empty() {
        let states: Vec<String> = filter.states.iter().map(|s| format!("'{}'", s.as_str())).collect();
        q = q.sql(format!(" AND state IN ({})", states.join(", ")));
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
        q = q.sql(" AND JSON_CONTAINS(tags, JSON_QUOTE(?))").bind::<Text, _>(tag.clone());
    }
    if let Some(search) = &filter.search {
        let search = search.to_string();
        q = q
            .sql(" AND (JSON_CONTAINS(args, ?) OR JSON_CONTAINS(meta, ?))")
            .bind::<Text, _>(search.clone())
            .bind::<Text, _>(search);
    }
    if let Some(text) = &filter.error {
        // JSON_TABLE reads each entry's fields; LOWER on both sides ignores case whatever
        // the collation; the escape is CHAR(92), a backslash whatever NO_BACKSLASH_ESCAPES
        // says. A count, not EXISTS: MySQL (9.7) turns that EXISTS into a semi-join that
        // reads the table function once, as if it were not correlated, and finds nothing.
        let pattern = jobs_driver::like_pattern(text);
        q = q
            .sql(
                " AND (SELECT COUNT(*) FROM JSON_TABLE(jobs.errors, '$[*]' COLUMNS (\
                   message LONGTEXT PATH '$.message', error_type VARCHAR(1024) PATH '$.error_type')) AS e \
                 WHERE LOWER(e.message) LIKE LOWER(?) ESCAPE CHAR(92) \
                    OR LOWER(e.error_type) LIKE LOWER(?) ESCAPE CHAR(92)) > 0",
            )
            .bind::<Text, _>(pattern.clone())
            .bind::<Text, _>(pattern);
    }
    if let Some(floor) = filter.id_at_least {
        q = q.sql(" AND id >= ?").bind::<BigInt, _>(floor);
    }
    if let Some(from) = filter.from {
        q = q.sql(" AND created_at >= ?").bind::<Datetime, _>(naive(from));
    }
    if let Some(to) = filter.to {
        q = q.sql(" AND created_at < ?").bind::<Datetime, _>(naive(to));
    }
    q
}

/// Where a page starts: after job `id`, at its time `at` in a time order (`None`: by id
/// alone, as when the cursor job is gone or no longer has that time).
#[derive(Debug, Clone, Copy)]
struct Cursor {
    id: i64,
    at: Option<chrono::NaiveDateTime>,
}

#[derive(QueryableByName)]
struct At {
    #[diesel(sql_type = diesel::sql_types::Nullable<Datetime>)]
    at: Option<chrono::NaiveDateTime>,
}

/// The time column of `filter`'s order, if it is a time order. Recently finished reads
/// `state_at`, which is `finalized_at` in the final states (the only ones that order
/// reads), so that `jobs_state_at_idx` (state, state_at, and the id InnoDB appends) serves
/// a finished state's page in order: ordered by `finalized_at`, MariaDB sorted every
/// completed job for a page (0.85 s at 1 M jobs).
///
/// Newest or oldest first in a created window reads `created_at` (`jobs_created_idx`:
/// created_at, id), the window a range of it; by id, every newer job would be passed
/// first. (Ids follow creation time except between transactions that overlap.) Not with
/// an id window (`id_at_least`), which pages by id, nor for a bulk action's walk (`ids`),
/// which pages the window by id, as its contract and the other drivers do.
fn time_column(filter: &JobFilter, ids: bool) -> Option<&'static str> {
    let window = (filter.from.is_some() || filter.to.is_some()) && filter.id_at_least.is_none() && !ids;
    match filter.order {
        JobOrder::NewestFirst | JobOrder::OldestFirst if window => Some("created_at"),
        JobOrder::NewestFirst | JobOrder::OldestFirst => None,
        JobOrder::DueSoonest => Some("scheduled_at"),
        JobOrder::RecentlyFinished => Some("state_at"),
    }
}

/// The cursor for `before`: the job's time read from its row first, so that a page after a
/// job pruned meanwhile goes on from its id rather than coming back empty. In the
/// recently-finished order that time is `finalized_at` (NULL once the job left its final
/// state, retried say, and the page then goes on from its id), not `state_at`, which would
/// then be its new due time.
async fn cursor<C>(conn: &mut C, filter: &JobFilter, before: Option<i64>, ids: bool) -> Result<Option<Cursor>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let Some(id) = before else { return Ok(None) };
    let column = match time_column(filter, ids) {
        Some("state_at") => Some("finalized_at"),
        other => other,
    };
    let at = match column {
        None => None,
        Some(column) => diesel::sql_query(format!("SELECT {column} AS at FROM jobs WHERE id = ?"))
            .bind::<BigInt, _>(id)
            .load::<At>(conn)
            .await?
            .into_iter()
            .next()
            .and_then(|r| r.at),
    };
    Ok(Some(Cursor { id, at }))
}

/// The cursor after `row`, in `filter`'s order.
fn cursor_after(filter: &JobFilter, row: &JobRow, ids: bool) -> Cursor {
    let at = match filter.order {
        JobOrder::NewestFirst | JobOrder::OldestFirst => {
            time_column(filter, ids).map(|_| naive(row.created_at))
        }
        JobOrder::DueSoonest => Some(naive(row.scheduled_at)),
        JobOrder::RecentlyFinished => row.finalized_at.map(naive),
    };
    Cursor { id: row.id, at }
}

/// The filter's rows after `cursor` in its order, at most `limit`.
///
/// In a time order, the page's ids are found first, from the index alone, and its rows
/// joined to them: asked for whole rows, MariaDB read a finished state's index from its
/// newest entry down to the cursor (0.8 s for a page in the middle of 1 M jobs) where the
/// ids alone are a range of it (11 ms).
fn page(what: &str, filter: &JobFilter, cursor: Option<Cursor>, limit: i64, ids: bool) -> Query {
    let deferred = what != "id" && time_column(filter, ids).is_some();
    let mut q = if deferred {
        filtered(&format!("SELECT {what} FROM ("), "id AS page_id", filter)
    } else {
        filtered("", what, filter)
    };
    let descending = filter.order.descending();
    let op = if descending { "<" } else { ">" };
    if let Some(Cursor { id, at }) = cursor {
        q = match (time_column(filter, ids), at) {
            // Spelled out rather than as a row comparison, which MariaDB reads as no range.
            (Some(column), Some(at)) => q
                .sql(format!(" AND ({column} {op} ? OR ({column} = ? AND id {op} ?))"))
                .bind::<Datetime, _>(at)
                .bind::<Datetime, _>(at)
                .bind::<BigInt, _>(id),
            _ => q.sql(format!(" AND id {op} ?")).bind::<BigInt, _>(id),
        };
    }
    let created = time_column(filter, ids).is_some();
    let order = match filter.order {
        JobOrder::NewestFirst if created => " ORDER BY created_at DESC, id DESC LIMIT ?",
        JobOrder::OldestFirst if created => " ORDER BY created_at ASC, id ASC LIMIT ?",
        JobOrder::NewestFirst => " ORDER BY id DESC LIMIT ?",
        JobOrder::OldestFirst => " ORDER BY id ASC LIMIT ?",
        JobOrder::DueSoonest => " ORDER BY scheduled_at ASC, id ASC LIMIT ?",
        // Finished rows only: the states say so already when they are all final; else the
        // final states are named (not `finalized_at IS NOT NULL`, the same rows, which
        // turned MariaDB's range on `jobs_state_at_idx` into a read of the whole state).
        JobOrder::RecentlyFinished
            if !filter.states.is_empty() && filter.states.iter().all(|s| s.is_final()) =>
        {
            " ORDER BY state_at DESC, id DESC LIMIT ?"
        }
        JobOrder::RecentlyFinished => {
            " AND state IN ('completed', 'discarded', 'cancelled') ORDER BY state_at DESC, id DESC LIMIT ?"
        }
    };
    let q = q.sql(order).bind::<BigInt, _>(limit);
    if !deferred {
        return q;
    }
    let outer = match filter.order {
        JobOrder::NewestFirst => "created_at DESC, id DESC",
        JobOrder::OldestFirst => "created_at ASC, id ASC",
        JobOrder::DueSoonest => "scheduled_at ASC, id ASC",
        JobOrder::RecentlyFinished => "state_at DESC, id DESC",
    };
    q.sql(format!(") AS page JOIN jobs ON jobs.id = page.page_id ORDER BY {outer}"))
}

/// Whether `row` matches the filter's search exactly (see the module's note), and, in the
/// recently-finished order, is finished (the order's ids come from an index on a virtual
/// column, which MariaDB 10.11 can read stale right after a row changed).
fn found(filter: &JobFilter, row: &JobRow) -> bool {
    let finished = filter.order != JobOrder::RecentlyFinished || row.finalized_at.is_some();
    finished
        && filter.search.as_ref().is_none_or(|want| {
            jobs_driver::json_contains(&row.args, want) || jobs_driver::json_contains(&row.meta, want)
        })
}

/// A page of jobs in the filter's order, after the job `before` when given.
pub(crate) async fn list<C>(
    conn: &mut C,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    list_in(conn, filter, before, limit, false).await
}

/// [`list`], in a bulk action's order when `ids` (see [`time_column`]).
async fn list_in<C>(
    conn: &mut C,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
    ids: bool,
) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let mut rows = Vec::new();
    let mut cursor = cursor(conn, filter, before, ids).await?;
    loop {
        let want = limit - rows.len() as i64;
        let read: Vec<StoredJob> = page(job_columns!(), filter, cursor, want, ids).load(conn).await?;
        let exhausted = (read.len() as i64) < want;
        let read = into_rows(read)?;
        cursor = read.last().map(|r| cursor_after(filter, r, ids)).or(cursor);
        rows.extend(read.into_iter().filter(|r| found(filter, r)));
        let checked = filter.search.is_some() || filter.order == JobOrder::RecentlyFinished;
        if exhausted || rows.len() as i64 >= limit || !checked {
            return Ok(rows);
        }
    }
}

/// The ids of up to `limit` jobs matching `filter` with id below `before` (for bulk
/// actions, which walk the filter in bounded batches).
pub(crate) async fn list_ids<C>(
    conn: &mut C,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    if filter.search.is_some() {
        return Ok(list_in(conn, filter, before, limit, true).await?.into_iter().map(|r| r.id).collect());
    }
    let cursor = cursor(conn, filter, before, true).await?;
    let rows: Vec<crate::rows::Id> = page("id", filter, cursor, limit, true).load(conn).await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}

/// Counts the jobs matching `filter`: exactly up to `cap`; past it, only that there are
/// more (`AtLeast`).
pub(crate) async fn count<C>(conn: &mut C, filter: &JobFilter, cap: i64) -> Result<Count>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let n = if filter.search.is_some() {
        list(conn, filter, None, cap.saturating_add(1)).await?.len() as i64
    } else {
        let row: CountRow = filtered("SELECT COUNT(*) AS n FROM (", "1", filter)
            .sql(" LIMIT ?) AS t")
            .bind::<BigInt, _>(cap.saturating_add(1))
            .get_result(conn)
            .await?;
        row.n
    };
    Ok(if n > cap { Count::AtLeast(cap) } else { Count::Exact(n) })
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
pub(crate) async fn counts_by_queue_and_state<C>(conn: &mut C) -> Result<Vec<(String, JobState, i64)>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let rows: Vec<PairRow> =
        diesel::sql_query("SELECT queue, state, COUNT(*) AS n FROM jobs GROUP BY queue, state")
            .load(conn)
            .await?;
    let mut counts =
        rows.into_iter().map(|r| Ok((r.queue, state(&r.state)?, r.n))).collect::<Result<Vec<_>>>()?;
    counts.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    Ok(counts)
}
