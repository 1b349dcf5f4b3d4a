//! The raw-SQL ceiling on SQLite: the bare statements a queue needs, with no framework
//! around them, run by 4 client threads (a connection each) for `seconds` per scenario, on
//! a database file of its own with the settings the driver uses (WAL, `synchronous = FULL`,
//! a busy timeout). The same scenarios, names and table shape as `../shared/bench/`
//! (pgbench on Postgres), so the ratios read the same way:
//!
//! - `enqueue_1`: one insert per commit; `enqueue_100`: one statement inserting 100 rows;
//! - `claim_N_update`: a statement claiming up to N available jobs (`UPDATE … WHERE id IN
//!   (SELECT … LIMIT N) RETURNING id, args`), then one marking them completed;
//! - `claim_100_delete`: the same, deleting them instead.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use diesel::sql_types::{BigInt, Integer, Text};
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};

use crate::ceiling::record;
use crate::claimed_row::Claimed;
use crate::measure::{BenchResult, Figures};

const SCHEMA: &str = "\
CREATE TABLE jobs (
  id            INTEGER PRIMARY KEY,
  queue         TEXT    NOT NULL DEFAULT 'default',
  kind          TEXT    NOT NULL,
  args          TEXT    NOT NULL DEFAULT '{}',
  state         TEXT    NOT NULL DEFAULT 'available',
  priority      INTEGER NOT NULL DEFAULT 1,
  attempt       INTEGER NOT NULL DEFAULT 0,
  max_attempts  INTEGER NOT NULL DEFAULT 25,
  scheduled_at  INTEGER NOT NULL,
  attempted_at  INTEGER,
  finished_at   INTEGER,
  errors        TEXT,
  locked_by     TEXT,
  unique_key    TEXT,
  created_at    INTEGER NOT NULL
);
CREATE INDEX jobs_fetch_idx ON jobs (queue, priority, scheduled_at, id) WHERE state = 'available';
CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (unique_key) WHERE unique_key IS NOT NULL;";

// :n available jobs, all due, priorities 1..4.
const SEED: &str = "\
WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ?1)
INSERT INTO jobs (queue, kind, args, priority, max_attempts, scheduled_at, created_at)
SELECT 'default', 'send_email',
       json_object('user_id', x, 'template', 'welcome_email', 'locale', 'en-US', 'attempt_hint', x % 7),
       1 + x % 4, 25, ?2 - 3600000 + x, ?2 - 3600000
FROM g";

const ENQUEUE_1: &str = "\
INSERT INTO jobs (queue, kind, args, priority, max_attempts, scheduled_at, created_at)
VALUES ('default', 'send_email', json_object('user_id', ?1, 'template', 'welcome_email', 'locale', 'en-US'),
        1 + ?1 % 4, 25, ?2, ?2)";

const ENQUEUE_100: &str = "\
WITH RECURSIVE g(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM g WHERE x < 99)
INSERT INTO jobs (queue, kind, args, priority, max_attempts, scheduled_at, created_at)
SELECT 'default', 'send_email', json_object('user_id', ?1 + x, 'template', 'welcome_email', 'locale', 'en-US'),
       1 + x % 4, 25, ?2, ?2
FROM g";

const CLAIM: &str = "\
UPDATE jobs SET state = 'running', attempt = attempt + 1, attempted_at = ?2, locked_by = ?3
WHERE id IN (SELECT id FROM jobs
             WHERE state = 'available' AND queue = 'default' AND scheduled_at <= ?2
             ORDER BY priority, scheduled_at, id
             LIMIT ?1)
RETURNING id, args";

const COMPLETE: &str = "UPDATE jobs SET state = 'completed', finished_at = ?2 WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running'";

// ?2 (the time the completion binds) is unused: both finishing statements take the same binds.
const DELETE: &str = "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1)) AND ?2 IS NOT NULL";

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn open(path: &Path) -> BenchResult<SqliteConnection> {
    Ok(jobs_core::sqlite::connect_sync(path)?)
}

/// One client's unit of work: returns how many jobs it moved.
type Script = fn(&mut SqliteConnection, client: usize, n: i64) -> diesel::QueryResult<u64>;

fn enqueue_1(conn: &mut SqliteConnection, _client: usize, n: i64) -> diesel::QueryResult<u64> {
    diesel::sql_query(ENQUEUE_1)
        .bind::<BigInt, _>(n)
        .bind::<BigInt, _>(now_ms())
        .execute(conn)
        .map(|r| r as u64)
}

fn enqueue_100(conn: &mut SqliteConnection, _client: usize, n: i64) -> diesel::QueryResult<u64> {
    diesel::sql_query(ENQUEUE_100)
        .bind::<BigInt, _>(n * 100)
        .bind::<BigInt, _>(now_ms())
        .execute(conn)
        .map(|r| r as u64)
}

fn claim_then(
    conn: &mut SqliteConnection,
    client: usize,
    size: i32,
    finish: &str,
) -> diesel::QueryResult<u64> {
    let claimed: Vec<Claimed> = diesel::sql_query(CLAIM)
        .bind::<Integer, _>(size)
        .bind::<BigInt, _>(now_ms())
        .bind::<Text, _>(format!("worker-{client}"))
        .load(conn)?;
    let ids: Vec<i64> = claimed.iter().map(|c| c.id).collect();
    diesel::sql_query(finish)
        .bind::<Text, _>(serde_json::Value::from(ids).to_string())
        .bind::<BigInt, _>(now_ms())
        .execute(conn)?;
    Ok(claimed.len() as u64)
}

fn claim_1_update(conn: &mut SqliteConnection, client: usize, _n: i64) -> diesel::QueryResult<u64> {
    claim_then(conn, client, 1, COMPLETE)
}

fn claim_10_update(conn: &mut SqliteConnection, client: usize, _n: i64) -> diesel::QueryResult<u64> {
    claim_then(conn, client, 10, COMPLETE)
}

fn claim_100_update(conn: &mut SqliteConnection, client: usize, _n: i64) -> diesel::QueryResult<u64> {
    claim_then(conn, client, 100, COMPLETE)
}

fn claim_100_delete(conn: &mut SqliteConnection, client: usize, _n: i64) -> diesel::QueryResult<u64> {
    claim_then(conn, client, 100, DELETE)
}

/// Empties the table, then seeds `rows` available jobs.
fn fresh(path: &Path, rows: i64) -> BenchResult {
    let mut conn = open(path)?;
    conn.batch_execute("DELETE FROM jobs")?;
    if rows > 0 {
        diesel::sql_query(SEED).bind::<BigInt, _>(rows).bind::<BigInt, _>(now_ms()).execute(&mut conn)?;
    }
    conn.batch_execute("ANALYZE; PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// Runs `script` from `clients` threads for `seconds`; returns jobs per second.
fn run_script(path: &Path, script: Script, clients: usize, seconds: u64) -> BenchResult<f64> {
    let moved = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for client in 0..clients {
        let mut conn = open(path)?;
        let (moved, stop) = (moved.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = (client as i64) << 40;
            while !stop.load(Ordering::Relaxed) {
                // A busy database past the timeout is a failed "transaction", as in pgbench.
                if let Ok(jobs) = script(&mut conn, client, n) {
                    moved.fetch_add(jobs, Ordering::Relaxed);
                }
                n += 1;
            }
        }));
    }
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().map_err(|_| "a ceiling client panicked")?;
    }
    Ok(moved.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

/// Runs every scenario with `seconds` each and 4 clients on a fresh file in `dir`, prints a
/// line per scenario and records it (the mean of its runs, as on Postgres).
pub(crate) fn run(dir: &Path, seconds: u64, figures: &mut Figures) -> BenchResult {
    let path = dir.join("jobs_ceiling.db");
    for stale in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
    }
    open(&path)?.batch_execute(SCHEMA)?;
    let clients = 4;
    println!(
        "ceiling # ceiling: SQLite {}, {clients} clients, {seconds}s each, WAL, synchronous=FULL",
        sqlite_version(&path)?
    );
    let scenarios: [(&str, i64, i64, Script); 6] = [
        ("enqueue_1", 1, 0, enqueue_1),
        ("enqueue_100", 100, 0, enqueue_100),
        ("claim_1_update", 1, 1_000_000, claim_1_update),
        ("claim_10_update", 10, 1_000_000, claim_10_update),
        ("claim_100_update", 100, 1_000_000, claim_100_update),
        ("claim_100_delete", 100, 1_000_000, claim_100_delete),
    ];
    for (name, per_txn, seed, script) in scenarios {
        fresh(&path, seed)?;
        let rate = run_script(&path, script, clients, seconds)?;
        println!("ceiling {name:<18} {per_txn:>4} jobs/txn  {rate:>9.0} jobs/s");
        record(figures, name, rate);
    }
    for stale in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
    }
    Ok(())
}

#[derive(QueryableByName)]
struct Version {
    #[diesel(sql_type = Text)]
    v: String,
}

fn sqlite_version(path: &Path) -> BenchResult<String> {
    Ok(diesel::sql_query("SELECT sqlite_version() AS v").get_result::<Version>(&mut open(path)?)?.v)
}
