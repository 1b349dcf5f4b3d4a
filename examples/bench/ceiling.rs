//! The raw-SQL ceiling: `../shared/bench/ceiling.sh` (pgbench) on the same server, in the
//! same run, so that the framework's figures can be quoted as ratios.

use jobs_core::testing::PgCluster;

use crate::measure::{BenchResult, Figures};

/// Runs the ceiling script with `seconds` per scenario and 4 clients; records each line
/// (when it runs more than once, each figure is the mean of its runs).
pub(crate) fn run(
    cluster: Option<&PgCluster>,
    url: &str,
    ceiling_dir: &str,
    seconds: u64,
    figures: &mut Figures,
) -> BenchResult {
    let script = std::path::Path::new(ceiling_dir).join("ceiling.sh");
    if !script.exists() {
        println!("ceiling: {} not found; skipped", script.display());
        return Ok(());
    }
    let mut command = on_server(cluster, url);
    command.arg(&script).arg(seconds.to_string()).arg("4");
    let out = command.output()?;
    if !out.status.success() {
        println!("ceiling: {} failed ({}):", script.display(), out.status);
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            println!("ceiling   {line}");
        }
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("ceiling {line}");
        if line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let (Some(name), Some(rate)) = (fields.first(), fields.get(3).and_then(|r| r.parse::<f64>().ok()))
        {
            record(figures, name, rate);
        }
    }
    // The script leaves its database behind with a million dead rows, whose vacuum would
    // run during the next scenario (it put 150 ms into a pickup-latency run).
    let dropped = on_server(cluster, url)
        .arg("-c")
        .arg(concat!(
            r#"PATH="$PATH:$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)"; "#,
            r#"psql -qX "$DATABASE_URL" -c "DROP DATABASE IF EXISTS jobs_ceiling""#
        ))
        .output()?;
    if !dropped.status.success() {
        println!(
            "ceiling: dropping jobs_ceiling failed: {}",
            String::from_utf8_lossy(&dropped.stderr).trim()
        );
    }
    Ok(())
}

/// A `bash` command whose `DATABASE_URL` and `PGHOST` name the measured server the way the
/// ceiling script expects them.
fn on_server(cluster: Option<&PgCluster>, url: &str) -> std::process::Command {
    let mut command = std::process::Command::new("bash");
    match cluster {
        // The script derives its database's URL by replacing the URL's last path segment,
        // so give it a socket-free URL and the socket directory through PGHOST.
        Some(cluster) => {
            command.env("DATABASE_URL", "postgresql://postgres@/postgres").env("PGHOST", cluster.socket_dir())
        }
        // The same for a server of the user's: a `?host=` parameter becomes PGHOST.
        // A host in the URL itself would override PGHOST for psql, so it is dropped.
        None => match url.split_once('?') {
            Some((base, query)) => {
                let mut base = base.to_owned();
                for (key, value) in query.split('&').filter_map(|p| p.split_once('=')) {
                    if key == "host" {
                        command.env("PGHOST", value);
                        if let Some(at) = base.find('@')
                            && let Some(slash) = base[at..].find('/')
                        {
                            base.replace_range(at + 1..at + slash, "");
                        }
                    }
                }
                command.env("DATABASE_URL", base)
            }
            None => command.env("DATABASE_URL", url),
        },
    };
    command
}

/// The ceiling a scenario is compared with: the mean of the ceiling runs just before and just
/// after it (`before` runs preceded it), or the one of them that exists.
pub(crate) fn neighbours(figure: &serde_json::Value, before: usize) -> Option<f64> {
    let runs: Vec<f64> = figure["runs"].as_array()?.iter().filter_map(|r| r.as_f64()).collect();
    let around: Vec<f64> = [before.checked_sub(1), Some(before)]
        .into_iter()
        .flatten()
        .filter_map(|i| runs.get(i).copied())
        .collect();
    (!around.is_empty()).then(|| around.iter().sum::<f64>() / around.len() as f64)
}

/// Records one ceiling run of scenario `name`. The ceiling runs several times between the
/// framework's scenarios (the machine's speed drifts over minutes; docs/benchmarks.md):
/// every run is kept, and the headline figure is their mean.
pub(crate) fn record(figures: &mut Figures, name: &str, rate: f64) {
    let key = format!("ceiling_{name}");
    let mut runs: Vec<f64> = figures
        .get(&key)
        .and_then(|v| v["runs"].as_array())
        .map(|a| a.iter().filter_map(|r| r.as_f64()).collect())
        .unwrap_or_default();
    runs.push(rate);
    let mean = runs.iter().sum::<f64>() / runs.len() as f64;
    figures.insert(key, serde_json::json!({ "jobs_per_s": mean, "runs": runs }));
}
