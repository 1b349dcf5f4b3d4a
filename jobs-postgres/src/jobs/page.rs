//! Pages of jobs for the dashboard and the CLI: a filter's rows in one of the orders
//! (`JobOrder`), keyset pages after a cursor job.
//!
//! Orders by id page on the id alone. Orders by a time (creation, in a created window;
//! due; finish) page on the cursor job's (time, id), read first; when the cursor job is
//! gone (pruned, deleted) or has no such time any more, the page goes on from its id.
//!
//! A created window is read in creation order: its finished jobs through
//! `jobs_created_idx` (finished jobs only, so that enqueueing pays nothing for it), each
//! other state through that state's own index, one page each, merged here (with a kind or
//! a tag, one page of the live table for them all).

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Timestamptz};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{JobFilter, JobListParams, JobOrder, JobRow, JobState, Result};

use super::list::filtered;
use super::read::StoredJob;
use crate::schema::jobs_all;

type Boxed<'a> = jobs_all::BoxedQuery<'a, Pg>;

/// The time a page is ordered by, besides the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Time {
    /// `created_at`: newest or oldest first in a created window, which `jobs_created_idx`
    /// (created_at, id) serves; walking ids would pass every newer job before reaching the
    /// window. (Ids follow creation time except between transactions that overlap.) Not
    /// with an id window (`id_at_least`): that one pages by id.
    Created,
    /// `scheduled_at`, soonest first.
    Due,
    /// `finalized_at`, most recent first.
    Finished,
}

/// The time `filter`'s pages are ordered by. Ids for a bulk action (`for_ids`) keep id
/// order in a created window: they page through the whole window, in no order a person
/// reads.
fn time_of(filter: &JobFilter, for_ids: bool) -> Option<Time> {
    let window = (filter.from.is_some() || filter.to.is_some()) && filter.id_at_least.is_none() && !for_ids;
    match filter.order {
        JobOrder::NewestFirst | JobOrder::OldestFirst => window.then_some(Time::Created),
        JobOrder::DueSoonest => Some(Time::Due),
        JobOrder::RecentlyFinished => Some(Time::Finished),
    }
}

/// Where a page starts: after this job, at this time of it (`None`: by id alone).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor {
    id: i64,
    at: Option<DateTime<Utc>>,
}

/// The cursor for `before` in `filter`'s order: the job's time read from its row.
async fn cursor<C>(conn: &mut C, time: Option<Time>, before: Option<i64>) -> Result<Option<Cursor>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let Some(id) = before else { return Ok(None) };
    let at = match time {
        None => None,
        Some(time) => {
            let row = jobs_all::table.find(id);
            match time {
                Time::Created => {
                    row.select(jobs_all::created_at.nullable()).first(conn).await.optional()?.flatten()
                }
                Time::Due => {
                    row.select(jobs_all::scheduled_at.nullable()).first(conn).await.optional()?.flatten()
                }
                Time::Finished => row.select(jobs_all::finalized_at).first(conn).await.optional()?.flatten(),
            }
        }
    };
    Ok(Some(Cursor { id, at }))
}

/// The filter's rows after `cursor` in its order, at most `limit`: one statement (the plan
/// tests prepare it).
#[cfg(test)]
pub(crate) fn page(filter: &JobFilter, cursor: Option<Cursor>, limit: i64) -> Boxed<'_> {
    page_in(filter, time_of(filter, false), cursor, limit)
}

/// [`page`] ordered by `time`.
fn page_in(filter: &JobFilter, time: Option<Time>, cursor: Option<Cursor>, limit: i64) -> Boxed<'_> {
    let mut q = filtered(filter);
    let descending = filter.order.descending();
    if time == Some(Time::Finished) {
        q = q.filter(jobs_all::finalized_at.is_not_null());
    }
    if let Some(Cursor { id, at }) = cursor {
        let op = if descending { "<" } else { ">" };
        let column = time.map(|t| match t {
            Time::Created => "created_at",
            Time::Due => "scheduled_at",
            Time::Finished => "finalized_at",
        });
        q = match (column, at) {
            (Some(column), Some(at)) => q.filter(
                diesel::dsl::sql::<Bool>(&format!("(jobs_all.{column}, jobs_all.id) {op} ("))
                    .bind::<Timestamptz, _>(at)
                    .sql(", ")
                    .bind::<BigInt, _>(id)
                    .sql(")"),
            ),
            _ if descending => q.filter(jobs_all::id.lt(id)),
            _ => q.filter(jobs_all::id.gt(id)),
        };
    }
    let q = match (time, descending) {
        (Some(Time::Created), true) => q.order((jobs_all::created_at.desc(), jobs_all::id.desc())),
        (Some(Time::Created), false) => q.order((jobs_all::created_at.asc(), jobs_all::id.asc())),
        (Some(Time::Due), _) => q.order((jobs_all::scheduled_at.asc(), jobs_all::id.asc())),
        (Some(Time::Finished), _) => q.order((jobs_all::finalized_at.desc(), jobs_all::id.desc())),
        (None, true) => q.order(jobs_all::id.desc()),
        (None, false) => q.order(jobs_all::id.asc()),
    };
    q.limit(limit)
}

/// A page of jobs in the filter's order, after the job `before` when given.
pub(crate) async fn list<C>(conn: &mut C, params: JobListParams<'_>) -> Result<Vec<JobRow>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let filter = params.filter;
    let time = time_of(filter, false);
    let cursor = cursor(conn, time, params.before).await?;
    let mut states = filter.states.clone();
    states.sort_by_key(|s| s.as_str());
    states.dedup();
    if states.is_empty() && time == Some(Time::Created) {
        states = JobState::ALL.to_vec();
    }
    // The pages to merge, each with the states it reads, or none: one query.
    let groups: Vec<Vec<JobState>> = match time {
        // `jobs_finalized_idx` is ordered by state first: one index-ordered page per
        // state, rather than every row of the states sorted (152 ms p50 for discarded and
        // cancelled at 5 M jobs, against a few ms per state).
        Some(Time::Finished) if states.len() > 1 => states.iter().map(|s| vec![*s]).collect(),
        // Finished jobs through `jobs_created_idx`, every other state on its own.
        Some(Time::Created) if states.iter().any(|s| !s.is_final()) => {
            let (finished, other): (Vec<JobState>, Vec<JobState>) = states.iter().partition(|s| s.is_final());
            // A kind or a tag is in no index of the live table: each state's page would
            // scan it (20-40 ms at 125,000 live jobs), so one page reads them all.
            let mut groups: Vec<Vec<JobState>> = if filter.kind.is_some() || filter.tag.is_some() {
                vec![other]
            } else {
                other.into_iter().map(|s| vec![s]).collect()
            };
            if !finished.is_empty() {
                groups.push(finished);
            }
            groups
        }
        _ => Vec::new(),
    };
    if groups.is_empty() {
        let rows: Vec<StoredJob> =
            page_in(filter, time, cursor, params.limit).select(StoredJob::as_select()).load(conn).await?;
        return Ok(rows.into_iter().map(JobRow::from).collect());
    }
    let mut rows: Vec<JobRow> = Vec::new();
    for states in groups {
        let one = JobFilter { states, ..filter.clone() };
        let page: Vec<StoredJob> =
            page_in(&one, time, cursor, params.limit).select(StoredJob::as_select()).load(conn).await?;
        rows.extend(page.into_iter().map(JobRow::from));
    }
    match (time, filter.order) {
        (Some(Time::Finished), _) => rows.sort_unstable_by_key(|j| std::cmp::Reverse((j.finalized_at, j.id))),
        (_, JobOrder::OldestFirst) => rows.sort_unstable_by_key(|j| (j.created_at, j.id)),
        _ => rows.sort_unstable_by_key(|j| std::cmp::Reverse((j.created_at, j.id))),
    }
    rows.truncate(usize::try_from(params.limit).unwrap_or(usize::MAX));
    Ok(rows)
}

/// The ids of a page ([`list`] without the rows), for bulk actions: in a created window
/// by id (see [`time_of`]).
pub(crate) async fn list_ids<C>(conn: &mut C, params: JobListParams<'_>) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let time = time_of(params.filter, true);
    let cursor = cursor(conn, time, params.before).await?;
    Ok(page_in(params.filter, time, cursor, params.limit).select(jobs_all::id).load(conn).await?)
}
