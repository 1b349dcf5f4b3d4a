//! The raw-SQL ceiling on MariaDB/MySQL: the bare statements a queue needs there, with no
//! framework around them, run by 4 clients (a connection each) for `seconds` per
//! scenario, on a table of their own in the measured database. The same scenarios, names
//! and table shape as `../shared/bench/` (pgbench on Postgres), so the ratios read the
//! same way:
//!
//! - `enqueue_1`: one insert per commit; `enqueue_100`: one statement inserting 100 rows;
//! - `claim_N_update`: the claim seed 001 describes, with `SKIP LOCKED` (an `UPDATE` of
//!   up to N available rows, locked in a derived table, stamped with a token; then a
//!   `SELECT` of the rows carrying the token), then one statement marking them completed;
//! - `claim_100_delete`: the same, deleting them instead.
//!
//! MariaDB has no `UPDATE … RETURNING`: the token and its read-back are the least any
//! queue on it does, so the driver's claim and the ceiling's are the same two statements.
//! Rows to insert come from MariaDB's sequence engine (`seq_0_to_99`); MySQL, which has
//! none, reads them from a table of numbers made once (`ceiling_numbers`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};

use crate::ceiling::record;
use crate::claimed_row::Claimed;
use crate::measure::{BenchResult, Figures};

const SCHEMA: &str = "\
DROP TABLE IF EXISTS ceiling_jobs;
CREATE TABLE ceiling_jobs (
  id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  queue         VARCHAR(255) NOT NULL DEFAULT 'default',
  kind          VARCHAR(255) NOT NULL,
  args          LONGTEXT     NOT NULL,
  state         VARCHAR(16)  NOT NULL DEFAULT 'available',
  priority      SMALLINT     NOT NULL DEFAULT 1,
  attempt       INT          NOT NULL DEFAULT 0,
  max_attempts  INT          NOT NULL DEFAULT 25,
  scheduled_at  DATETIME(6)  NOT NULL,
  attempted_at  DATETIME(6)  NULL,
  finished_at   DATETIME(6)  NULL,
  errors        LONGTEXT     NULL,
  locked_by     VARCHAR(255) NULL,
  lock_token    BIGINT       NULL,
  unique_key    VARCHAR(255) NULL,
  created_at    DATETIME(6)  NOT NULL,
  KEY ceiling_fetch_idx (queue, state, priority, scheduled_at, id),
  KEY ceiling_token_idx (lock_token),
  UNIQUE KEY ceiling_unique_idx (unique_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin";

// `?` available jobs, all due, priorities 1..4, numbered from 1 by `{numbers}`.
const SEED: &str = "\
INSERT INTO ceiling_jobs (queue, kind, args, priority, max_attempts, scheduled_at, created_at)
SELECT 'default', 'send_email',
       JSON_OBJECT('user_id', seq, 'template', 'welcome_email', 'locale', 'en-US', 'attempt_hint', seq % 7),
       1 + seq % 4, 25, UTC_TIMESTAMP(6) - INTERVAL 1 HOUR + INTERVAL seq MICROSECOND,
       UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
FROM {numbers}";

/// MySQL's numbers 0 to 999,999: six digits' cross product, made once per run.
const NUMBERS: &str = "\
DROP TABLE IF EXISTS ceiling_numbers;
CREATE TABLE ceiling_numbers (seq INT NOT NULL PRIMARY KEY) ENGINE = InnoDB;
INSERT INTO ceiling_numbers
WITH d (n) AS (SELECT 0 UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
               UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)
SELECT a.n + 10 * b.n + 100 * c.n + 1000 * e.n + 10000 * f.n + 100000 * g.n
FROM d a, d b, d c, d e, d f, d g";

/// Where the rows of [`SEED`] and [`ENQUEUE_100`] come from: MariaDB's sequence engine, or
/// MySQL's `ceiling_numbers`.
struct Numbers {
    seed: &'static str,
    hundred: &'static str,
}

const MARIADB_NUMBERS: Numbers = Numbers { seed: "seq_1_to_1000000 WHERE seq <= ?", hundred: "seq_0_to_99" };
const MYSQL_NUMBERS: Numbers = Numbers {
    seed: "(SELECT seq + 1 AS seq FROM ceiling_numbers WHERE seq < ?) AS s",
    hundred: "ceiling_numbers WHERE seq < 100",
};

const ENQUEUE_1: &str = "\
INSERT INTO ceiling_jobs (queue, kind, args, priority, max_attempts, scheduled_at, created_at)
VALUES ('default', 'send_email', JSON_OBJECT('user_id', ?, 'template', 'welcome_email', 'locale', 'en-US'),
        1, 25, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";

const ENQUEUE_100: &str = "\
INSERT INTO ceiling_jobs (queue, kind, args, priority, max_attempts, scheduled_at, created_at)
SELECT 'default', 'send_email', JSON_OBJECT('user_id', ? + seq, 'template', 'welcome_email', 'locale', 'en-US'),
       1 + seq % 4, 25, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
FROM {numbers}";

const CLAIM: &str = "\
UPDATE (SELECT id FROM ceiling_jobs
        WHERE queue = 'default' AND state = 'available'
        ORDER BY priority, scheduled_at, id
        LIMIT ?
        FOR UPDATE SKIP LOCKED) AS c
STRAIGHT_JOIN ceiling_jobs j ON j.id = c.id
SET j.state = 'running', j.attempt = j.attempt + 1, j.attempted_at = UTC_TIMESTAMP(6), j.locked_by = ?,
    j.lock_token = ?";

const READ_BACK: &str = "SELECT id, args FROM ceiling_jobs WHERE lock_token = ? AND state = 'running'";

/// What a client does per transaction.
#[derive(Clone, Copy)]
enum Script {
    Enqueue1,
    Enqueue100,
    Claim { size: i32, delete: bool },
}

async fn once(
    conn: &mut AsyncMysqlConnection,
    script: Script,
    enqueue_100: &str,
    client: usize,
    n: i64,
) -> diesel::QueryResult<u64> {
    match script {
        Script::Enqueue1 => {
            diesel::sql_query(ENQUEUE_1).bind::<BigInt, _>(n).execute(conn).await.map(|r| r as u64)
        }
        Script::Enqueue100 => {
            diesel::sql_query(enqueue_100).bind::<BigInt, _>(n * 100).execute(conn).await.map(|r| r as u64)
        }
        Script::Claim { size, delete } => {
            let token = rand::random::<i64>();
            let claimed = diesel::sql_query(CLAIM)
                .bind::<Integer, _>(size)
                .bind::<Text, _>(format!("worker-{client}"))
                .bind::<BigInt, _>(token)
                .execute(conn)
                .await?;
            if claimed == 0 {
                return Ok(0);
            }
            let rows: Vec<Claimed> = diesel::sql_query(READ_BACK).bind::<BigInt, _>(token).load(conn).await?;
            let ids: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
            let finish = if delete {
                format!("DELETE FROM ceiling_jobs WHERE id IN ({})", ids.join(","))
            } else {
                format!(
                    "UPDATE ceiling_jobs SET state = 'completed', finished_at = UTC_TIMESTAMP(6) \
                     WHERE id IN ({}) AND state = 'running'",
                    ids.join(",")
                )
            };
            conn.batch_execute(&finish).await?;
            Ok(rows.len() as u64)
        }
    }
}

/// Empties the table, then seeds `rows` available jobs.
async fn fresh(url: &str, rows: i64, numbers: &Numbers) -> BenchResult {
    let mut conn = jobs_core::mysql::connect(url).await?;
    conn.batch_execute("TRUNCATE TABLE ceiling_jobs").await?;
    if rows > 0 {
        let seed = SEED.replace("{numbers}", numbers.seed);
        diesel::sql_query(seed).bind::<BigInt, _>(rows).execute(&mut conn).await?;
    }
    conn.batch_execute("ANALYZE TABLE ceiling_jobs").await?;
    Ok(())
}

/// Runs `script` from `clients` tasks for `seconds`; returns jobs per second.
async fn run_script(
    url: &str,
    script: Script,
    numbers: &Numbers,
    clients: usize,
    seconds: u64,
) -> BenchResult<f64> {
    let enqueue_100: Arc<str> = ENQUEUE_100.replace("{numbers}", numbers.hundred).into();
    let moved = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for client in 0..clients {
        let mut conn = jobs_core::mysql::connect(url).await?;
        let (moved, stop, enqueue_100) = (moved.clone(), stop.clone(), enqueue_100.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = (client as i64) << 40;
            while !AtomicBool::load(&stop, Ordering::Relaxed) {
                // A deadlock or lock timeout is a failed transaction, as in pgbench.
                if let Ok(jobs) = once(&mut conn, script, &enqueue_100, client, n).await {
                    moved.fetch_add(jobs, Ordering::Relaxed);
                }
                n += 1;
            }
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.map_err(|_| "a ceiling client panicked")?;
    }
    Ok(AtomicU64::load(&moved, Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

#[derive(QueryableByName)]
struct Version {
    #[diesel(sql_type = Text)]
    v: String,
}

/// Runs every scenario with `seconds` each and 4 clients on the database `url` names,
/// prints a line per scenario and records it (the mean of its runs, as on Postgres).
pub(crate) async fn run(url: &str, seconds: u64, figures: &mut Figures) -> BenchResult {
    let mut conn = jobs_core::mysql::connect(url).await?;
    conn.batch_execute(SCHEMA).await?;
    let version: Version = diesel::sql_query("SELECT VERSION() AS v").get_result(&mut conn).await?;
    let numbers = if version.v.contains("MariaDB") {
        MARIADB_NUMBERS
    } else {
        conn.batch_execute(NUMBERS).await?;
        MYSQL_NUMBERS
    };
    let clients = 4;
    println!("ceiling # ceiling: MariaDB/MySQL {}, {clients} clients, {seconds}s each", version.v);
    let scenarios: [(&str, i64, i64, Script); 6] = [
        ("enqueue_1", 1, 0, Script::Enqueue1),
        ("enqueue_100", 100, 0, Script::Enqueue100),
        ("claim_1_update", 1, 1_000_000, Script::Claim { size: 1, delete: false }),
        ("claim_10_update", 10, 1_000_000, Script::Claim { size: 10, delete: false }),
        ("claim_100_update", 100, 1_000_000, Script::Claim { size: 100, delete: false }),
        ("claim_100_delete", 100, 1_000_000, Script::Claim { size: 100, delete: true }),
    ];
    for (name, per_txn, seed, script) in scenarios {
        fresh(url, seed, &numbers).await?;
        let rate = run_script(url, script, &numbers, clients, seconds).await?;
        println!("ceiling {name:<18} {per_txn:>4} jobs/txn  {rate:>9.0} jobs/s");
        record(figures, name, rate);
    }
    conn.batch_execute("DROP TABLE ceiling_jobs; DROP TABLE IF EXISTS ceiling_numbers").await?;
    Ok(())
}
