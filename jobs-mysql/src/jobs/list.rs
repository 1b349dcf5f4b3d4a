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
        // MariaDB's JSON_TABLE reads each entry's fields; LOWER on both sides ignores
        // case whatever the collation; the escape is CHAR(92), a backslash whatever
        // NO_BACKSLASH_ESCAPES says.
        let pattern = jobs_driver::like_pattern(text);
        q = q
            .sql(
                " AND EXISTS (SELECT 1 FROM JSON_TABLE(jobs.errors, '$[*]' COLUMNS (\
                   message LONGTEXT PATH '$.message', error_type VARCHAR(1024) PATH '$.error_type')) AS e \
                 WHERE LOWER(e.message) LIKE LOWER(?) ESCAPE CHAR(92) \
                    OR LOWER(e.error_type) LIKE LOWER(?) ESCAPE CHAR(92))",
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

/// The filter's rows older than `before`, newest first, at most `limit`.
fn page(what: &str, filter: &JobFilter, before: Option<i64>, limit: i64) -> Query {
    let mut q = filtered("", what, filter);
    // The time orders continue after the cursor job's (time, id), read from its row.
    let (beyond, order) = match filter.order {
        JobOrder::NewestFirst => (" AND id < ?", " ORDER BY id DESC LIMIT ?"),
        JobOrder::OldestFirst => (" AND id > ?", " ORDER BY id ASC LIMIT ?"),
        JobOrder::DueSoonest => (
            " AND (scheduled_at, id) > (SELECT b.scheduled_at, b.id FROM jobs AS b WHERE b.id = ?)",
            " ORDER BY scheduled_at ASC, id ASC LIMIT ?",
        ),
        JobOrder::RecentlyFinished => (
            " AND (finalized_at, id) < (SELECT b.finalized_at, b.id FROM jobs AS b WHERE b.id = ?)",
            " AND finalized_at IS NOT NULL ORDER BY finalized_at DESC, id DESC LIMIT ?",
        ),
    };
    if let Some(before) = before {
        q = q.sql(beyond).bind::<BigInt, _>(before);
    }
    q.sql(order).bind::<BigInt, _>(limit)
}

/// Whether `row` matches the filter's search exactly (see the module's note).
fn found(filter: &JobFilter, row: &JobRow) -> bool {
    filter.search.as_ref().is_none_or(|want| {
        jobs_driver::json_contains(&row.args, want) || jobs_driver::json_contains(&row.meta, want)
    })
}

/// A page of jobs, newest first, strictly older than `before` (an id) when given.
pub(crate) async fn list<C>(
    conn: &mut C,
    filter: &JobFilter,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let mut rows = Vec::new();
    let mut before = before;
    loop {
        let want = limit - rows.len() as i64;
        let read: Vec<StoredJob> = page(job_columns!(), filter, before, want).load(conn).await?;
        let exhausted = (read.len() as i64) < want;
        let read = into_rows(read)?;
        before = read.last().map(|r| r.id).or(before);
        rows.extend(read.into_iter().filter(|r| found(filter, r)));
        if exhausted || rows.len() as i64 >= limit || filter.search.is_none() {
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
        return Ok(list(conn, filter, before, limit).await?.into_iter().map(|r| r.id).collect());
    }
    let rows: Vec<crate::rows::Id> = page("id", filter, before, limit).load(conn).await?;
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
