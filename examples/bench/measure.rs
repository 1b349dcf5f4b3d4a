//! What the scenarios measure with: CPU and memory counters from `/proc`, percentiles, and
//! small SQL helpers for setting up and checking the table.

use std::collections::BTreeMap;

use jobs_core::postgres::Pool;

/// The figures of a run, written as JSON at the end.
pub(crate) type Figures = BTreeMap<String, serde_json::Value>;

/// The benchmark's error type: any error, with its message.
pub(crate) type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The value at quantile `p` of sorted samples (`NaN` when there are none).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// CPU seconds (user + system) that process `pid` (`self` for this one) has used.
pub(crate) fn cpu_seconds_of(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds this process has used.
pub(crate) fn cpu_seconds() -> f64 {
    cpu_seconds_of("self")
}

/// CPU seconds the whole machine has spent busy (every process: workers and Postgres).
pub(crate) fn machine_busy_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .map(|l| l.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect())
        .unwrap_or_default();
    // user nice system idle iowait irq softirq steal
    let busy: f64 =
        ticks.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, t)| t).sum();
    busy / 100.0
}

/// CPU seconds the machine's Postgres servers have used: every process named `postgres`
/// (the postmasters and their live backends), plus what each postmaster's ended children
/// used. Compare two readings taken while one benchmark cluster runs.
pub(crate) fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0.0 };
    let mut total = 0.0;
    for entry in entries.flatten() {
        let pid = entry.file_name();
        let Some(pid) = pid.to_str().filter(|p| p.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        if !head.ends_with("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        // utime, stime; and cutime, cstime: a postmaster's reaped backends.
        total += (ticks(11) + ticks(12) + ticks(13) + ticks(14)) / 100.0;
    }
    total
}

/// This process's resident memory, in MB.
pub(crate) fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Runs a statement of the benchmark's own (setup, not measured).
pub(crate) async fn sql(pool: &Pool, statement: &str) -> BenchResult {
    let mut conn = pool.get().await?;
    diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), &mut conn).await?;
    Ok(())
}

/// Empties the jobs table and the archive.
pub(crate) async fn reset(pool: &Pool) -> BenchResult {
    sql(pool, "TRUNCATE jobs, jobs_archive").await?;
    sql(pool, "VACUUM ANALYZE jobs, jobs_archive").await
}
