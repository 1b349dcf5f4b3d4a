//! Inserting jobs: one statement per batch, whatever its size or mix, in input order, in
//! whatever transaction the connection is in; then one `job_notifications` row per queue
//! that received available jobs (see `notifications`).
//!
//! The batch travels as one JSON array that `JSON_TABLE` turns into rows, so the
//! statement's text never changes and stays prepared. A job that holds a uniqueness key
//! goes in with `ON DUPLICATE KEY UPDATE` on `jobs_unique_idx` (the generated column that
//! holds the key only in the job's unique states): MariaDB then returns the row that
//! holds the key. Every new row carries the statement's token in `lock_token`, so a
//! returned row with another token is an existing job (seed 002's de-duplicated insert).

use std::collections::{BTreeSet, HashMap};

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{DriverError, Inserted, NewJob, Notification, Result};

use crate::cached::CachedQuery;
use crate::jobs::read::states_list;
use crate::notifications;
use crate::rows::token;
use crate::time::{naive, naive_opt};

/// The insert, with `$conflict` after the `SELECT`. `$1` the rows (JSON), `$2` now,
/// `$3` the token.
macro_rules! insert_sql {
    ($conflict:literal) => {
        concat!(
            "\
INSERT INTO jobs (state, kind, queue, args, meta, tags, priority, max_attempts, timeout_ms,
                  created_at, scheduled_at, attempted_by, errors, unique_key, unique_states, lock_token)
SELECT IF(r.due > r.now, 'scheduled', 'available'), r.kind, r.queue, r.args, r.meta, r.tags, r.priority,
       r.max_attempts, r.timeout_ms, r.now, r.due, '[]', '[]', UNHEX(r.unique_key), r.unique_states, $3
FROM (
    SELECT j.*, c.now,
           COALESCE(j.run_at, c.now + INTERVAL (COALESCE(j.delay_ms, 0) * 1000) MICROSECOND) AS due
    FROM JSON_TABLE($1, '$[*]' COLUMNS (
             ord FOR ORDINALITY,
             kind VARCHAR(255) PATH '$.kind',
             queue VARCHAR(255) PATH '$.queue',
             args LONGTEXT PATH '$.args',
             meta LONGTEXT PATH '$.meta',
             tags LONGTEXT PATH '$.tags',
             priority SMALLINT PATH '$.priority',
             max_attempts INT PATH '$.max_attempts',
             timeout_ms BIGINT PATH '$.timeout_ms',
             run_at DATETIME(6) PATH '$.run_at',
             delay_ms BIGINT PATH '$.delay_ms',
             unique_key VARCHAR(64) PATH '$.unique_key',
             unique_states VARCHAR(128) PATH '$.unique_states')) AS j
    CROSS JOIN (SELECT COALESCE($2, UTC_TIMESTAMP(6)) AS now) AS c
) AS r
ORDER BY r.ord
",
            $conflict,
            "
RETURNING id, lock_token, state, queue"
        )
    };
}

/// A batch without uniqueness keys.
const INSERT: &str = insert_sql!("");

/// A batch with uniqueness keys: a held key returns the job holding it.
const INSERT_UNIQUE: &str = insert_sql!("ON DUPLICATE KEY UPDATE jobs.id = jobs.id");

#[derive(QueryableByName)]
struct InsertedRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    lock_token: Option<i64>,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    queue: String,
}

/// The batch after removing in-batch duplicates of a uniqueness key: `rows` go to the
/// database, `slot[i]` says which of them input `i` maps to.
struct Deduplicated<'a> {
    rows: Vec<&'a NewJob>,
    slot: Vec<usize>,
}

fn deduplicate(jobs: &[NewJob]) -> Deduplicated<'_> {
    let mut rows = Vec::with_capacity(jobs.len());
    let mut slot = Vec::with_capacity(jobs.len());
    let mut first_with_key: HashMap<&[u8], usize> = HashMap::new();
    for job in jobs {
        if let Some((key, _)) = &job.unique {
            if let Some(&first) = first_with_key.get(key.as_slice()) {
                slot.push(first);
                continue;
            }
            first_with_key.insert(key.as_slice(), rows.len());
        }
        slot.push(rows.len());
        rows.push(job);
    }
    Deduplicated { rows, slot }
}

/// The rows as the JSON array `JSON_TABLE` reads: text columns as JSON strings (their JSON
/// escaped), absent values left out (`NULL`).
fn rows_json(rows: &[&NewJob]) -> String {
    let mut array = Vec::with_capacity(rows.len());
    for job in rows {
        let mut row = serde_json::Map::new();
        row.insert("kind".into(), job.kind.as_ref().into());
        row.insert("queue".into(), job.queue.as_ref().into());
        row.insert("args".into(), job.args.as_str().into());
        row.insert("meta".into(), job.meta.as_ref().into());
        row.insert("tags".into(), serde_json::Value::from(job.tags.as_slice()).to_string().into());
        row.insert("priority".into(), job.priority.into());
        row.insert("max_attempts".into(), job.max_attempts.into());
        if let Some(ms) = job.timeout_ms {
            row.insert("timeout_ms".into(), ms.into());
        }
        if let Some(at) = job.run_at {
            row.insert("run_at".into(), naive(at).format("%Y-%m-%d %H:%M:%S%.6f").to_string().into());
        }
        if let Some(ms) = job.delay_ms {
            row.insert("delay_ms".into(), ms.into());
        }
        if let Some((key, states)) = &job.unique {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            row.insert("unique_key".into(), hex.into());
            row.insert("unique_states".into(), states_list(states).into());
        }
        array.push(serde_json::Value::Object(row));
    }
    serde_json::Value::Array(array).to_string()
}

/// A batch ready to send: the rows after de-duplication, the statement, and its token.
struct Prepared<'a> {
    batch: Deduplicated<'a>,
    sql: &'static str,
    rows: String,
    token: i64,
}

fn prepare(jobs: &[NewJob]) -> Prepared<'_> {
    let batch = deduplicate(jobs);
    let unique = batch.rows.iter().any(|job| job.unique.is_some());
    let rows = rows_json(&batch.rows);
    Prepared { batch, sql: if unique { INSERT_UNIQUE } else { INSERT }, rows, token: token() }
}

fn query<'a>(prepared: &'a Prepared<'_>, now: Option<chrono::DateTime<chrono::Utc>>) -> CachedQuery<'a> {
    CachedQuery::new(prepared.sql)
        .bind::<Text, _>(prepared.rows.as_str())
        .bind::<Nullable<Datetime>, _>(naive_opt(now))
        .bind::<BigInt, _>(prepared.token)
}

/// Each input's result, and one wake-up per queue that received available jobs.
fn results(
    prepared: &Prepared<'_>,
    returned: Vec<InsertedRow>,
) -> Result<(Vec<Inserted>, Vec<Notification>)> {
    let batch = &prepared.batch;
    if returned.len() != batch.rows.len() {
        return Err(DriverError::unexpected(format!(
            "{} jobs inserted as {}",
            batch.rows.len(),
            returned.len()
        )));
    }
    let mut queues = BTreeSet::new();
    let per_row: Vec<Inserted> = returned
        .iter()
        .map(|r| {
            let existing = r.lock_token != Some(prepared.token);
            if !existing && r.state == "available" {
                queues.insert(r.queue.as_str());
            }
            Inserted { id: r.id, existing }
        })
        .collect();
    let wake_ups =
        queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect();
    let mut used = vec![false; per_row.len()];
    let results = batch
        .slot
        .iter()
        .map(|&row| {
            let first_use = !std::mem::replace(&mut used[row], true);
            Inserted { id: per_row[row].id, existing: per_row[row].existing || !first_use }
        })
        .collect();
    Ok((results, wake_ups))
}

/// Inserts `jobs` in one statement on `conn` (the driver's, or an application's in its
/// transaction), then adds the wake-ups. Returns each input's result and the wake-ups.
pub(crate) async fn insert_many<C>(
    conn: &mut C,
    jobs: &[NewJob],
    now: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(Vec<Inserted>, Vec<Notification>)>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    if jobs.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let prepared = prepare(jobs);
    let returned: Vec<InsertedRow> = query(&prepared, now).load(conn).await?;
    let (results, wake_ups) = results(&prepared, returned)?;
    for wake_up in &wake_ups {
        notifications::add(conn, wake_up).await?;
    }
    Ok((results, wake_ups))
}

/// [`insert_many`] on a synchronous diesel connection (`MysqlConnection`, pooled or not).
pub(crate) fn insert_many_sync<C>(conn: &mut C, jobs: &[NewJob]) -> Result<Vec<Inserted>>
where
    C: diesel::connection::LoadConnection<Backend = Mysql>,
{
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let prepared = prepare(jobs);
    let returned: Vec<InsertedRow> = diesel::RunQueryDsl::load(query(&prepared, None), conn)?;
    let (results, wake_ups) = results(&prepared, returned)?;
    for wake_up in &wake_ups {
        notifications::add_sync(conn, wake_up)?;
    }
    Ok(results)
}
