//! The data the dashboard scenario loads: a shape (tenants, kinds, queues, error texts)
//! and, per backend, the statements that write `n` jobs of it straight into the tables,
//! with the counters a busy cluster leaves.
//!
//! Job `g`'s tenant, kind and state come from three independent hashes of `g` (the same
//! arithmetic on every backend), so that no tenant is tied to a kind or a state: with
//! 1,000 tenants, one tenant is 0.1 % of the jobs and one tenant's discarded jobs 0.001 %.
//! A kind runs on one queue (`kind % queues`), as kinds do. One job in 50 is also tagged
//! `vip`. States, per 1,000 jobs: 955 completed, 10 discarded, 10 cancelled, 5 retryable,
//! 10 scheduled, 7 available, 3 running. One job is created per millisecond, the newest now.

use std::str::FromStr;

use crate::measure::BenchResult;
use crate::target::Admin;

/// How the loaded jobs spread over tenants, kinds, queues and error texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataShape {
    /// Its name in the figures (`today`, `wide`, or the options spelled out).
    pub(crate) name: String,
    /// Tenants, each a tag `tenant_N`.
    pub(crate) tenants: u64,
    /// Kinds, `kind_N`.
    pub(crate) kinds: u64,
    /// Queues, `queue_N`.
    pub(crate) queues: u64,
    /// Distinct error types of the failed jobs (`error_N`, in their messages too).
    pub(crate) errors: u64,
}

impl DataShape {
    /// The shape the scenario had before: 20 tenants, 10 kinds, 5 queues.
    pub(crate) fn today() -> DataShape {
        DataShape { name: "today".into(), tenants: 20, kinds: 10, queues: 5, errors: 2 }
    }

    /// A multi-tenant app's: 1,000 tenants, 120 kinds on 24 queues, 50 error types.
    pub(crate) fn wide() -> DataShape {
        DataShape { name: "wide".into(), tenants: 1_000, kinds: 120, queues: 24, errors: 50 }
    }
}

impl FromStr for DataShape {
    type Err = String;

    /// `today`, `wide`, or `tenants=N:kinds=N:queues=N:errors=N` (any left out as in
    /// `wide`).
    fn from_str(s: &str) -> Result<DataShape, String> {
        match s {
            "today" => return Ok(DataShape::today()),
            "wide" => return Ok(DataShape::wide()),
            _ => {}
        }
        let mut shape = DataShape { name: s.to_owned(), ..DataShape::wide() };
        for part in s.split(':') {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: a shape is `today`, `wide` or key=value parts"))?;
            let value = value
                .parse::<u64>()
                .ok()
                .filter(|v| (1..=1_000_000).contains(v))
                .ok_or_else(|| format!("`{part}`: {key} takes a number from 1 to 1,000,000"))?;
            match key {
                "tenants" => shape.tenants = value,
                "kinds" => shape.kinds = value,
                "queues" => shape.queues = value,
                "errors" => shape.errors = value,
                other => return Err(format!("`{other}`: a shape sets tenants, kinds, queues or errors")),
            }
        }
        Ok(shape)
    }
}

/// Rows per statement.
const CHUNK: u64 = 100_000;

/// The digits 0 to 9 as a derived table (`d`), for MariaDB and MySQL to make numbers from
/// by cross joins (MySQL has no sequence engine, and a recursive CTE is capped at 1,000
/// rows by default).
const DIGITS: &str = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 \
     UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";

/// Three hashes of `g` (24 bits each) and what they pick, as SQL every backend evaluates
/// alike: `t` the tenant, `k` the kind, `e` the error type, `s` the state's number out of
/// 1,000. `div` is integer division (`/` on Postgres and SQLite, `DIV` on MariaDB and MySQL,
/// where `/` gives decimals).
fn picks(shape: &DataShape, div: &str) -> String {
    let DataShape { tenants, kinds, errors, .. } = shape;
    format!(
        "((g * 2654435761) % 4294967296) {div} 256 % {tenants} AS t, \
         ((g * 2246822519) % 4294967296) {div} 256 % {kinds} AS k, \
         ((g * 2246822519) % 4294967296) {div} 256 {div} {kinds} % {errors} AS e, \
         ((g * 3266489917) % 4294967296) {div} 256 % 1000 AS s"
    )
}

/// The state for `s` (see the module's text).
const STATE: &str = "CASE WHEN s < 955 THEN 'completed' WHEN s < 965 THEN 'discarded' WHEN s < 975 THEN 'cancelled' \
     WHEN s < 980 THEN 'retryable' WHEN s < 990 THEN 'scheduled' WHEN s < 997 THEN 'available' ELSE 'running' END";

/// Loads `n` jobs of `shape` and a week of counters, and takes the statistics.
pub(crate) async fn load(admin: &Admin, shape: &DataShape, n: u64) -> BenchResult {
    admin.reset().await?;
    let mut from = 1;
    while from <= n {
        let to = (from + CHUNK - 1).min(n);
        for statement in jobs_sql(admin, shape, n, from, to) {
            admin.sql(&statement).await?;
        }
        from = to + 1;
    }
    for statement in after_load_sql(admin, n) {
        admin.sql(&statement).await?;
    }
    for statement in counters_sql(admin, shape) {
        admin.sql(&statement).await?;
    }
    admin.analyze().await?;
    if admin.is_postgres() {
        admin.sql("VACUUM ANALYZE job_stats, job_kind_stats").await?;
    }
    Ok(())
}

/// The statements that write jobs `from..=to` of `n`.
fn jobs_sql(admin: &Admin, shape: &DataShape, n: u64, from: u64, to: u64) -> Vec<String> {
    let mysql = !admin.is_postgres() && !admin.is_sqlite();
    let picks = picks(shape, if mysql { "DIV" } else { "/" });
    let q = shape.queues;
    if admin.is_postgres() {
        // Finished jobs straight into the archive, as completions and the archiver leave
        // them; the others into `jobs`.
        let select = format!(
            "SELECT g, st::job_state, 'queue_' || (k % {q}), 'kind_' || k,
                    jsonb_build_object('user_id', g % 100000, 'order', g), jsonb_build_object('request_id', 'req-' || g),
                    ARRAY['tenant_' || t] || CASE WHEN g % 50 = 0 THEN ARRAY['vip'] ELSE '{{}}'::text[] END,
                    0, CASE WHEN st IN ('available', 'scheduled') THEN 0 ELSE 1 END, 20,
                    at, CASE WHEN st IN ('scheduled', 'retryable') THEN now() + (1 + t % 3600) * interval '1 second' ELSE at END,
                    CASE WHEN st IN ('available', 'scheduled') THEN NULL ELSE at + interval '5 ms' END,
                    CASE WHEN st IN ('completed', 'discarded', 'cancelled') THEN at + interval '20 ms' END,
                    CASE WHEN st IN ('available', 'scheduled') THEN '{{}}'::text[] ELSE '{{bench-node}}'::text[] END,
                    CASE WHEN st = 'discarded' THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'error_type', 'error_' || e,
                             'message', 'card declined for order ' || g || ' (error_' || e || ')'))
                         WHEN st = 'retryable' THEN jsonb_build_array(jsonb_build_object('attempt', 1, 'error_type', 'error_' || e,
                             'message', 'the attempt exceeded its 30s timeout (error_' || e || ')'))
                         ELSE '[]'::jsonb END
             FROM generate_series({from}, {to}) AS g,
                  LATERAL (SELECT {picks}) AS p,
                  LATERAL (SELECT {STATE} AS st, now() - ({n} - g) * interval '1 ms' AS at) AS x"
        );
        let columns = "(id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts, created_at, \
                       scheduled_at, attempted_at, finalized_at, attempted_by, errors)";
        return vec![
            format!(
                "INSERT INTO jobs_archive {columns} {select} WHERE st IN ('completed', 'discarded', 'cancelled')"
            ),
            format!(
                "INSERT INTO jobs {columns} {select} WHERE st NOT IN ('completed', 'discarded', 'cancelled')"
            ),
        ];
    }
    if admin.is_sqlite() {
        let now = chrono::Utc::now().timestamp_millis();
        return vec![format!(
            "WITH RECURSIVE seq(g) AS (SELECT {from} UNION ALL SELECT g + 1 FROM seq WHERE g < {to}),
                  p AS (SELECT g, {picks} FROM seq),
                  x AS (SELECT p.*, {STATE} AS st, {now} - ({n} - g) AS at FROM p)
             INSERT INTO jobs (id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts, created_at,
                               scheduled_at, attempted_at, finalized_at, attempted_by, errors)
             SELECT g, st, 'queue_' || (k % {q}), 'kind_' || k,
                    json_object('user_id', g % 100000, 'order', g), json_object('request_id', 'req-' || g),
                    CASE WHEN g % 50 = 0 THEN json_array('tenant_' || t, 'vip') ELSE json_array('tenant_' || t) END,
                    0, CASE WHEN st IN ('available', 'scheduled') THEN 0 ELSE 1 END, 20,
                    at, CASE WHEN st IN ('scheduled', 'retryable') THEN {now} + (1 + t % 3600) * 1000 ELSE at END,
                    CASE WHEN st IN ('available', 'scheduled') THEN NULL ELSE at + 5 END,
                    CASE WHEN st IN ('completed', 'discarded', 'cancelled') THEN at + 20 END,
                    CASE WHEN st IN ('available', 'scheduled') THEN '[]' ELSE '[\"bench-node\"]' END,
                    CASE WHEN st = 'discarded' THEN json_array(json_object('attempt', 1, 'error_type', 'error_' || e,
                             'message', 'card declined for order ' || g || ' (error_' || e || ')'))
                         WHEN st = 'retryable' THEN json_array(json_object('attempt', 1, 'error_type', 'error_' || e,
                             'message', 'the attempt exceeded its 30s timeout (error_' || e || ')'))
                         ELSE '[]' END
             FROM x"
        )];
    }
    // MariaDB and MySQL: the numbers from a cross join of digits (MySQL has no sequence
    // engine, and a recursive CTE is capped at 1,000 rows by default).
    let digits = DIGITS;
    vec![format!(
        "INSERT INTO jobs (id, state, queue, kind, args, meta, tags, priority, attempt, max_attempts, created_at,
                           scheduled_at, attempted_at, finalized_at, attempted_by, attempted_node, errors)
         SELECT g, st, CONCAT('queue_', k % {q}), CONCAT('kind_', k),
                JSON_OBJECT('user_id', g % 100000, 'order', g), JSON_OBJECT('request_id', CONCAT('req-', g)),
                IF(g % 50 = 0, JSON_ARRAY(CONCAT('tenant_', t), 'vip'), JSON_ARRAY(CONCAT('tenant_', t))),
                0, IF(st IN ('available', 'scheduled'), 0, 1), 20,
                at, IF(st IN ('scheduled', 'retryable'), UTC_TIMESTAMP(6) + INTERVAL (1 + t % 3600) SECOND, at),
                IF(st IN ('available', 'scheduled'), NULL, at + INTERVAL 5000 MICROSECOND),
                IF(st IN ('completed', 'discarded', 'cancelled'), at + INTERVAL 20000 MICROSECOND, NULL),
                IF(st IN ('available', 'scheduled'), '[]', '[\"bench-node\"]'),
                IF(st IN ('available', 'scheduled'), NULL, 'bench-node'),
                CASE WHEN st = 'discarded' THEN JSON_ARRAY(JSON_OBJECT('attempt', 1, 'error_type', CONCAT('error_', e),
                         'message', CONCAT('card declined for order ', g, ' (error_', e, ')')))
                     WHEN st = 'retryable' THEN JSON_ARRAY(JSON_OBJECT('attempt', 1, 'error_type', CONCAT('error_', e),
                         'message', CONCAT('the attempt exceeded its 30s timeout (error_', e, ')')))
                     ELSE '[]' END
         FROM (SELECT p.*, {STATE} AS st, UTC_TIMESTAMP(6) - INTERVAL ({n} - g) * 1000 MICROSECOND AS at
               FROM (SELECT g, {picks}
                     FROM (SELECT {from} + a.d + 10 * b.d + 100 * c.d + 1000 * d.d + 10000 * e.d AS g
                           FROM {digits} a, {digits} b, {digits} c, {digits} d, {digits} e) AS nums
                     WHERE g <= {to}) AS p) AS x"
    )]
}

/// What follows the rows: the id sequence past them.
fn after_load_sql(admin: &Admin, n: u64) -> Vec<String> {
    if admin.is_postgres() {
        vec![format!("SELECT setval(pg_get_serial_sequence('jobs', 'id'), {n})")]
    } else if admin.is_sqlite() {
        vec![format!("INSERT OR REPLACE INTO sqlite_sequence (name, seq) VALUES ('jobs', {n})")]
    } else {
        vec![format!("ALTER TABLE jobs AUTO_INCREMENT = {}", n + 1)]
    }
}

/// Eight days of counters, as a busy cluster leaves them after the pruner's roll-ups (at
/// their default ages): per queue × 4 outcomes, every minute of the last day and every hour
/// before it; per kind × (4 outcomes + 8 run-time and 4 wait-time buckets), every minute of
/// the last two hours and every hour before them.
fn counters_sql(admin: &Admin, shape: &DataShape) -> Vec<String> {
    let (queues, kinds) = (shape.queues, shape.kinds);
    // Buckets as minutes before now's minute: the last day's (or two hours') minutes, then
    // every 60th minute back to 8 days.
    let queue_minutes = "m <= 1440 OR (m % 60 = 0 AND m <= 11520)";
    let kind_minutes = "m <= 120 OR (m % 60 = 0 AND m <= 11520)";
    let metrics = [
        ("completed", 0),
        ("retried", 0),
        ("discarded", 0),
        ("cancelled", 0),
        ("run_ms", 3),
        ("run_ms", 4),
        ("run_ms", 5),
        ("run_ms", 6),
        ("run_ms", 7),
        ("run_ms", 8),
        ("run_ms", 9),
        ("run_ms", 10),
        ("wait_ms", 0),
        ("wait_ms", 1),
        ("wait_ms", 2),
        ("wait_ms", 3),
    ];
    let union = |rows: Vec<String>| rows.join(" UNION ALL ");
    let metric_rows =
        union(metrics.iter().map(|(m, i)| format!("SELECT '{m}' AS metric, {i} AS idx")).collect());
    let outcome_rows = union(
        ["completed", "retryable", "discarded", "cancelled"]
            .iter()
            .map(|s| format!("SELECT '{s}' AS st"))
            .collect(),
    );
    let numbers =
        |below: u64, name: &str| union((0..below).map(|i| format!("SELECT {i} AS {name}")).collect());
    let queue_rows = numbers(queues, "q");
    let kind_rows = numbers(kinds, "k");
    if admin.is_postgres() {
        let bucket = "date_trunc('minute', now()) - m * interval '1 minute'";
        let mins =
            |minutes: &str| format!("(SELECT m FROM generate_series(0, 11520) AS m WHERE {minutes}) AS mm");
        return vec![
            "TRUNCATE job_stats, job_kind_stats".into(),
            format!(
                "INSERT INTO job_stats (bucket, queue, state, count)
                 SELECT {bucket}, 'queue_' || q, st::job_state, 1 + (m + q) % 50
                 FROM {}, ({queue_rows}) AS qq, ({outcome_rows}) AS ss",
                mins(queue_minutes)
            ),
            format!(
                "INSERT INTO job_kind_stats (bucket, kind, metric, idx, count)
                 SELECT {bucket}, 'kind_' || k, metric, idx, 1 + (m + k + idx) % 40
                 FROM {}, ({kind_rows}) AS kk, ({metric_rows}) AS xx",
                mins(kind_minutes)
            ),
        ];
    }
    if admin.is_sqlite() {
        let minute = chrono::Utc::now().timestamp() / 60 * 60_000;
        let mins = |minutes: &str| {
            format!(
                "(WITH RECURSIVE seq(m) AS (SELECT 0 UNION ALL SELECT m + 1 FROM seq WHERE m < 11520) \
                 SELECT m FROM seq WHERE {minutes}) AS mm"
            )
        };
        return vec![
            "DELETE FROM job_stats".into(),
            "DELETE FROM job_kind_stats".into(),
            format!(
                "INSERT INTO job_stats (bucket, queue, state, count)
                 SELECT {minute} - m * 60000, 'queue_' || q, st, 1 + (m + q) % 50
                 FROM {}, ({queue_rows}) AS qq, ({outcome_rows}) AS ss",
                mins(queue_minutes)
            ),
            format!(
                "INSERT INTO job_kind_stats (bucket, kind, metric, idx, count)
                 SELECT {minute} - m * 60000, 'kind_' || k, metric, idx, 1 + (m + k + idx) % 40
                 FROM {}, ({kind_rows}) AS kk, ({metric_rows}) AS xx",
                mins(kind_minutes)
            ),
        ];
    }
    let digits = DIGITS;
    let mins = |minutes: &str| {
        format!(
            "(SELECT m FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * d.d + 10000 * e.d AS m \
              FROM {digits} a, {digits} b, {digits} c, {digits} d, {digits} e) AS nums WHERE {minutes}) AS mm"
        )
    };
    let bucket = "DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%d %H:%i:00') - INTERVAL m MINUTE";
    vec![
        "TRUNCATE TABLE job_stats".into(),
        "TRUNCATE TABLE job_kind_stats".into(),
        format!(
            "INSERT INTO job_stats (bucket, queue, state, count)
             SELECT {bucket}, CONCAT('queue_', q), st, 1 + (m + q) % 50
             FROM {}, ({queue_rows}) AS qq, ({outcome_rows}) AS ss",
            mins(queue_minutes)
        ),
        format!(
            "INSERT INTO job_kind_stats (bucket, kind, metric, idx, count)
             SELECT {bucket}, CONCAT('kind_', k), metric, idx, 1 + (m + k + idx) % 40
             FROM {}, ({kind_rows}) AS kk, ({metric_rows}) AS xx",
            mins(kind_minutes)
        ),
    ]
}
