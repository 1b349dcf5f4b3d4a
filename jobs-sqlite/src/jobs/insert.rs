//! Inserting jobs, in input order, in whatever transaction the connection is in, plus one
//! `job_notifications` row per queue that received available jobs (see `notifications`).
//!
//! A batch whose jobs differ only in their arguments (every one-kind enqueue, most
//! batches) is one statement: the shared columns bound once, the arguments as one JSON
//! array that `json_each` walks ([`INSERT_SHARED`]). Any other batch is a loop over one
//! cached single-row statement (SQLite runs in this process: a statement costs
//! microseconds). A row holding a uniqueness key is inserted `ON CONFLICT DO NOTHING`
//! (one statement: no other writer can take the key in between); when nothing comes back,
//! the holder is looked up. The batch runs in a savepoint: all of it, or none.

use diesel::connection::LoadConnection;
use diesel::sql_types::{BigInt, Binary, Integer, Nullable, SmallInt, Text};
use diesel::sqlite::Sqlite;
use diesel_async::AsyncConnectionCore;
use jobs_driver::{Deduplicated, Inserted, JobState, NewJob, Notification, Result};

use crate::cached::CachedQuery;
use crate::notifications;
use crate::rows::Id;
use crate::time::to_ms;

/// One row, with `$conflict` before `RETURNING`.
macro_rules! insert_sql {
    ($conflict:literal) => {
        concat!(
            "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                  created_at, scheduled_at, unique_key, unique_states)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
",
            $conflict,
            "
RETURNING id"
        )
    };
}

/// A row without a key to hold.
const INSERT: &str = insert_sql!("");

/// A row that holds its uniqueness key: nothing is inserted (and no id comes back) when
/// another row holds it. One statement, so no other writer can take the key between a
/// check and the insert. The conflict target repeats `jobs_unique_idx`'s predicate.
const INSERT_UNIQUE: &str = insert_sql!(
    "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND instr(unique_states, '\"' || state || '\"') > 0
DO NOTHING"
);

/// A batch differing only in its arguments: `$4` is a JSON array of them, inserted in its
/// order (ids ascend with it). An element's JSON text is `json_each`'s `value` for an
/// object or array (the usual arguments); for a bare value, whose `value` is the SQL value
/// and not its JSON, it is written back as JSON by type (a real number is re-extracted as
/// JSON, so that one too large for a double keeps its text).
const INSERT_SHARED: &str = "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                  created_at, scheduled_at)
SELECT $1, $2, $3,
       CASE a.type WHEN 'object' THEN a.value WHEN 'array' THEN a.value
                   WHEN 'text' THEN json_quote(a.value) WHEN 'integer' THEN CAST(a.value AS TEXT)
                   WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null'
                   ELSE $4 -> a.fullkey END,
       $5, $6, $7, $8, $9, $10, $11
FROM json_each($4) AS a
ORDER BY a.key
RETURNING id";

// The terms of `jobs_unique_idx`'s predicate, repeated so that SQLite uses it.
const HELD: &str = "\
SELECT id FROM jobs
WHERE unique_key = $1 AND unique_key IS NOT NULL AND instr(unique_states, '\"' || state || '\"') > 0";

type Query<'a> = CachedQuery<'a>;

/// One input row as its statement binds it.
struct Planned<'a> {
    job: &'a NewJob,
    state: JobState,
    scheduled_at: i64,
    tags: String,
    unique_states: Option<String>,
    /// The key to look for first: set when the row, in its state, would hold its key.
    check_key: Option<&'a [u8]>,
}

/// The rows to insert, each uniqueness key once (`batch` maps every input to its row).
pub(crate) struct Plan<'a> {
    rows: Vec<Planned<'a>>,
    batch: Deduplicated<'a>,
}

/// Plans the insert of `jobs` at `now_ms`: due times, states, and the keys to check.
pub(crate) fn plan(jobs: &[NewJob], now_ms: i64) -> Plan<'_> {
    let batch = Deduplicated::new(jobs);
    let rows = batch
        .rows
        .iter()
        .map(|&job| {
            let scheduled_at =
                job.run_at.map(to_ms).unwrap_or(now_ms.saturating_add(job.delay_ms.unwrap_or(0)));
            let state = if scheduled_at > now_ms { JobState::Scheduled } else { JobState::Available };
            let check_key =
                job.unique.as_ref().filter(|(_, states)| states.contains(&state)).map(|(k, _)| k.as_slice());
            Planned {
                job,
                state,
                scheduled_at,
                tags: strings_json(&job.tags),
                unique_states: job.unique.as_ref().map(|(_, states)| states_json(states)),
                check_key,
            }
        })
        .collect();
    Plan { rows, batch }
}

impl Plan<'_> {
    /// One wake-up per queue that received available jobs.
    fn wake_ups(&self, per_row: &[Inserted]) -> Vec<Notification> {
        let queues: std::collections::BTreeSet<&str> = self
            .rows
            .iter()
            .zip(per_row)
            .filter(|(row, inserted)| !inserted.existing && row.state == JobState::Available)
            .map(|(row, _)| &*row.job.queue)
            .collect();
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect()
    }
}

/// State names as the JSON array `unique_states` stores.
pub(crate) fn states_json(states: &[JobState]) -> String {
    serde_json::Value::from(states.iter().map(|s| s.as_str()).collect::<Vec<_>>()).to_string()
}

/// Strings as the JSON array `tags` and `attempted_by` store.
pub(crate) fn strings_json(tags: &[String]) -> String {
    if tags.is_empty() { "[]".to_owned() } else { serde_json::Value::from(tags).to_string() }
}

fn insert_query<'a>(row: &'a Planned<'a>, now_ms: i64) -> Query<'a> {
    let job = row.job;
    CachedQuery::new(if row.check_key.is_some() { INSERT_UNIQUE } else { INSERT })
        .bind::<Text, _>(row.state.as_str())
        .bind::<Text, _>(&*job.kind)
        .bind::<Text, _>(&*job.queue)
        .bind::<Text, _>(job.args.as_str())
        .bind::<Text, _>(&*job.meta)
        .bind::<Text, _>(row.tags.as_str())
        .bind::<SmallInt, _>(job.priority)
        .bind::<Integer, _>(job.max_attempts)
        .bind::<Nullable<BigInt>, _>(job.timeout_ms)
        .bind::<BigInt, _>(now_ms)
        .bind::<BigInt, _>(row.scheduled_at)
        .bind::<Nullable<Binary>, _>(job.unique.as_ref().map(|(key, _)| key.as_slice()))
        .bind::<Nullable<Text>, _>(row.unique_states.as_deref())
}

/// The one statement of a batch that differs only in its arguments (see [`INSERT_SHARED`]),
/// or `None` for any other batch.
fn shared_query<'a>(plan: &'a Plan<'a>, now_ms: i64) -> Option<Query<'a>> {
    let rows = &plan.rows;
    let first = rows.first()?;
    if rows.len() < 2 || !NewJob::all_differ_only_in_args(rows.iter().map(|r| r.job)) {
        return None;
    }
    let mut args = String::with_capacity(rows.iter().map(|r| r.job.args.len() + 1).sum::<usize>() + 2);
    args.push('[');
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            args.push(',');
        }
        args.push_str(&row.job.args);
    }
    args.push(']');
    let job = first.job;
    Some(
        CachedQuery::new(INSERT_SHARED)
            .bind::<Text, _>(first.state.as_str())
            .bind::<Text, _>(&*job.kind)
            .bind::<Text, _>(&*job.queue)
            .bind::<Text, _>(args)
            .bind::<Text, _>(&*job.meta)
            .bind::<Text, _>(first.tags.as_str())
            .bind::<SmallInt, _>(job.priority)
            .bind::<Integer, _>(job.max_attempts)
            .bind::<Nullable<BigInt>, _>(job.timeout_ms)
            .bind::<BigInt, _>(now_ms)
            .bind::<BigInt, _>(first.scheduled_at),
    )
}

/// The new ids a shared insert of `rows` returned (in no particular order), as the
/// batch's results: ids ascend with the input.
fn shared_results(rows: usize, mut ids: Vec<Id>) -> Result<Vec<Inserted>> {
    if ids.len() != rows {
        return Err(jobs_driver::DriverError::unexpected(format!("{rows} jobs inserted as {}", ids.len())));
    }
    ids.sort_unstable_by_key(|r| r.id);
    Ok(ids.into_iter().map(|r| Inserted { id: r.id, existing: false }).collect())
}

fn held_query(key: &[u8]) -> Query<'_> {
    CachedQuery::new(HELD).bind::<Binary, _>(key)
}

// The statements of one batch commit or roll back together, also on an application's
// connection outside any transaction (where each would otherwise commit on its own).
const SAVEPOINT: &str = "SAVEPOINT jobs_insert";
const RELEASE: &str = "RELEASE jobs_insert";
const ROLLBACK: &str = "ROLLBACK TO jobs_insert; RELEASE jobs_insert";

/// Inserts `jobs` at `now_ms` on a synchronous connection (the driver's own, or an
/// application's), in whatever transaction it is in, all or nothing. Returns each input's
/// result and the wake-ups it added to `job_notifications`.
pub(crate) fn insert_many_sync<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now_ms: i64,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: LoadConnection<Backend = Sqlite>,
{
    conn.batch_execute(SAVEPOINT)?;
    let inserted = insert_rows_sync(conn, jobs, now_ms);
    conn.batch_execute(if inserted.is_ok() { RELEASE } else { ROLLBACK })?;
    inserted
}

fn insert_rows_sync<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now_ms: i64,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: LoadConnection<Backend = Sqlite>,
{
    use diesel::RunQueryDsl;
    let plan = plan(jobs, now_ms);
    let mut per_row = Vec::with_capacity(plan.rows.len());
    if let Some(shared) = shared_query(&plan, now_ms) {
        per_row = shared_results(plan.rows.len(), shared.load::<Id>(conn)?)?;
    }
    for row in plan.rows.iter().skip(per_row.len()) {
        let new: Option<Id> = insert_query(row, now_ms).load::<Id>(conn)?.pop();
        per_row.push(match (new, row.check_key) {
            (Some(new), _) => Inserted { id: new.id, existing: false },
            (None, Some(key)) => held_by(held_query(key).load::<Id>(conn)?)?,
            (None, None) => return Err(jobs_driver::DriverError::unexpected("an insert returned no id")),
        });
    }
    let wake_ups = plan.wake_ups(&per_row);
    for wake_up in &wake_ups {
        notifications::add(conn, wake_up)?;
    }
    Ok((plan.batch.results(&per_row)?, wake_ups))
}

/// The job holding a key an insert found taken.
fn held_by(mut holder: Vec<Id>) -> Result<Inserted> {
    match holder.pop() {
        Some(held) => Ok(Inserted { id: held.id, existing: true }),
        None => Err(jobs_driver::DriverError::unexpected("a uniqueness key was taken, but no job holds it")),
    }
}

/// [`insert_many_sync`] on an async connection of the application's (each statement is
/// one trip to the connection's blocking thread).
pub(crate) async fn insert_many_async<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now_ms: i64,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    conn.batch_execute(SAVEPOINT).await?;
    let inserted = insert_rows_async(conn, jobs, now_ms).await;
    conn.batch_execute(if inserted.is_ok() { RELEASE } else { ROLLBACK }).await?;
    inserted
}

async fn insert_rows_async<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now_ms: i64,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    use diesel_async::RunQueryDsl;
    let plan = plan(jobs, now_ms);
    let mut per_row = Vec::with_capacity(plan.rows.len());
    if let Some(shared) = shared_query(&plan, now_ms) {
        per_row = shared_results(plan.rows.len(), shared.load::<Id>(conn).await?)?;
    }
    for row in plan.rows.iter().skip(per_row.len()) {
        let new: Option<Id> = insert_query(row, now_ms).load::<Id>(conn).await?.pop();
        per_row.push(match (new, row.check_key) {
            (Some(new), _) => Inserted { id: new.id, existing: false },
            (None, Some(key)) => held_by(held_query(key).load::<Id>(conn).await?)?,
            (None, None) => return Err(jobs_driver::DriverError::unexpected("an insert returned no id")),
        });
    }
    let wake_ups = plan.wake_ups(&per_row);
    for wake_up in &wake_ups {
        notifications::add_async(conn, wake_up).await?;
    }
    Ok((plan.batch.results(&per_row)?, wake_ups))
}
