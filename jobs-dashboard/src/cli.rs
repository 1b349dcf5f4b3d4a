//! The `jobs-dashboard` command line: migrate, inspect and manage jobs, enqueue one from
//! JSON, and serve the dashboard.
//!
//! ```text
//! jobs-dashboard migrate
//! jobs-dashboard stats
//! jobs-dashboard retry --state discarded --queue mailers --yes
//! jobs-dashboard cancel --id 42
//! jobs-dashboard enqueue --kind app::send_welcome --queue mailers --args '{"user_id": 7}'
//! jobs-dashboard serve --bind 127.0.0.1:8080
//! ```
//!
//! Every command reads the database from `--database-url` or `DATABASE_URL`.

use std::io::Write;

use clap::{Args, Parser, Subcommand};
use enqueue::{EnqueueArgs, enqueue};
use jobs_core::driver::{Capability, JobCountByQueueAndStateParams, JobCountParams};
use jobs_core::{Action, Count, JobFilter, JobState, driver_for_url};
use limits::{LimitsArgs, limits};

mod enqueue;
mod error;
mod limits;

pub use error::CliError;

/// The `--database-url` help: the URL of each driver this build has.
fn database_url_help() -> String {
    let examples = jobs_core::driver_url_examples();
    if examples.is_empty() {
        return "The database holding the jobs (this build has no driver: turn on a feature of jobs-core)"
            .into();
    }
    format!("The database holding the jobs: {}", examples.join(", "))
}

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "jobs-dashboard", version, about = "Migrate, inspect and manage jobs; serve the dashboard.")]
pub struct Cli {
    /// The database holding the jobs (its help, `database_url_help`, lists a URL of each
    /// driver of the build).
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true, help = database_url_help())]
    database_url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Applies the pending migrations of the jobs schema.
    Migrate,
    /// Prints the number of jobs per queue and state.
    Stats,
    /// Makes jobs available to run now (failed, cancelled, scheduled or finished ones).
    Retry(Selection),
    /// Cancels jobs (running ones are asked to stop).
    Cancel(Selection),
    /// Deletes jobs (running ones are kept).
    Delete(Selection),
    /// Enqueues one job from JSON arguments.
    Enqueue(EnqueueArgs),
    /// Shows a queue's cluster-wide limits (global, per key, rate), or changes those given.
    Limits(LimitsArgs),
    /// Serves the dashboard.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: String,
        /// Path to mount the dashboard at.
        #[arg(long, default_value = "/")]
        mount: String,
        /// Hide and refuse every action.
        #[arg(long)]
        read_only: bool,
        /// Read pages from this replica of the database (actions still go to
        /// `--database-url`); the overview shows how far behind it is.
        #[arg(long, env = "JOBS_REPLICA_URL", hide_env_values = true)]
        replica_url: Option<String>,
    },
}

/// Which jobs an action applies to: ids, or a filter, or everything.
#[derive(Debug, Args)]
struct Selection {
    /// These jobs (repeatable).
    #[arg(long = "id")]
    ids: Vec<i64>,
    /// Jobs in this state (repeatable): pending, available, scheduled, running,
    /// retryable, completed, discarded, cancelled.
    #[arg(long = "state")]
    states: Vec<String>,
    /// Jobs in this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Jobs of this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Jobs with this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Jobs whose arguments or metadata contain this JSON object, e.g. '{"user_id": 7}'.
    #[arg(long)]
    search: Option<String>,
    /// Every job (instead of a filter).
    #[arg(long, conflicts_with_all = ["ids", "states", "queue", "kind", "tag", "search"])]
    all: bool,
    /// Act; without it, only say how many jobs would be changed.
    #[arg(long)]
    yes: bool,
}

/// Jobs changed per statement by an action on a filter.
const BATCH: i64 = 1_000;

impl Cli {
    fn url(&self) -> Result<&str, CliError> {
        self.database_url
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| CliError::Invalid("no database: pass --database-url or set DATABASE_URL".into()))
    }

    /// Runs the command, writing its report to `out`.
    pub async fn run(self, out: &mut impl Write) -> Result<(), CliError> {
        let url = self.url()?.to_owned();
        match self.command {
            Command::Migrate => {
                let applied = driver_for_url(&url, 1)?.migrate().await.map_err(jobs_core::Error::from)?;
                if applied.is_empty() {
                    writeln!(out, "the jobs schema is up to date")?;
                }
                for version in applied {
                    writeln!(out, "applied {version}")?;
                }
            }
            Command::Stats => stats(&url, out).await?,
            Command::Retry(selection) => act(&url, Action::Retry, selection, out).await?,
            Command::Cancel(selection) => act(&url, Action::Cancel, selection, out).await?,
            Command::Delete(selection) => act(&url, Action::Delete, selection, out).await?,
            Command::Enqueue(args) => enqueue(&url, args, out).await?,
            Command::Limits(args) => limits(&url, args, out).await?,
            Command::Serve { bind, mount, read_only, replica_url } => {
                serve(&url, replica_url.as_deref(), &bind, &mount, read_only, out).await?
            }
        }
        Ok(())
    }
}

async fn stats(url: &str, out: &mut impl Write) -> Result<(), CliError> {
    let driver = driver_for_url(url, 1)?;
    let counts = driver
        .job_count_by_queue_and_state(JobCountByQueueAndStateParams {})
        .await
        .map_err(jobs_core::Error::from)?;
    let mut queues: Vec<&str> = counts.iter().map(|(q, _, _)| q.as_str()).collect();
    queues.dedup();
    let width = queues.iter().map(|q| q.len()).max().unwrap_or(5).max(5);
    write!(out, "{:<width$}", "queue")?;
    for state in JobState::ALL {
        write!(out, " {:>10}", state.as_str())?;
    }
    writeln!(out)?;
    for queue in queues {
        write!(out, "{queue:<width$}")?;
        for state in JobState::ALL {
            let n = counts.iter().find(|(q, s, _)| q == queue && *s == state).map_or(0, |c| c.2);
            write!(out, " {n:>10}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

fn filter(selection: &Selection) -> Result<JobFilter, CliError> {
    let mut filter = JobFilter::default();
    for state in &selection.states {
        let state: JobState = state.parse().map_err(|_| {
            CliError::Invalid(format!(
                "unknown state `{state}`; use one of: {}",
                JobState::ALL.map(JobState::as_str).join(", ")
            ))
        })?;
        filter.states.push(state);
    }
    filter.queue = selection.queue.clone();
    filter.kind = selection.kind.clone();
    filter.tag = selection.tag.clone();
    if let Some(search) = &selection.search {
        let value: serde_json::Value = serde_json::from_str(search)
            .map_err(|e| CliError::Invalid(format!("--search is not valid JSON: {e}")))?;
        if !value.is_object() {
            return Err(CliError::Invalid("--search must be a JSON object, e.g. '{\"user_id\": 7}'".into()));
        }
        filter.search = Some(value);
    }
    Ok(filter)
}

async fn act(url: &str, action: Action, selection: Selection, out: &mut impl Write) -> Result<(), CliError> {
    let filter = filter(&selection)?;
    let verb = action.verb();
    if selection.ids.is_empty() && filter == JobFilter::default() && !selection.all {
        return Err(CliError::Invalid(format!(
            "say which jobs to {verb}: --id, a filter (--state, --queue, --kind, --tag, --search), or --all"
        )));
    }
    let driver = driver_for_url(url, 1)?;
    if filter.search.is_some() && !driver.capabilities().has(Capability::JsonContainment) {
        return Err(CliError::Invalid(format!(
            "--search needs {}, which the {} driver lacks",
            Capability::JsonContainment,
            driver.name()
        )));
    }
    if !selection.ids.is_empty() {
        if !selection.yes {
            writeln!(out, "would {verb} up to {} jobs by id; pass --yes to do it", selection.ids.len())?;
            return Ok(());
        }
        let applied = action.apply(&*driver, &selection.ids).await?;
        writeln!(
            out,
            "{} of {} jobs {}{}",
            applied.changed,
            selection.ids.len(),
            action.past(),
            applied.held_note()
        )?;
        return Ok(());
    }
    if !selection.yes {
        let count = driver
            .job_count(JobCountParams { filter: &filter, cap: 100_000 })
            .await
            .map_err(jobs_core::Error::from)?;
        let label = match count {
            Count::Exact(n) => n.to_string(),
            Count::Estimate(n) => format!("about {n}"),
            Count::AtLeast(n) => format!("more than {n}"),
        };
        writeln!(
            out,
            "{label} jobs match; pass --yes to {verb} them (running jobs are never retried or deleted, \
             pending ones never retried)"
        )?;
        return Ok(());
    }
    let applied = action.apply_to_matching(&*driver, &filter, BATCH).await?;
    writeln!(out, "{} jobs {}{}", applied.changed, action.past(), applied.held_note())?;
    Ok(())
}

async fn serve(
    url: &str,
    replica_url: Option<&str>,
    bind: &str,
    mount: &str,
    read_only: bool,
    out: &mut impl Write,
) -> Result<(), CliError> {
    if !read_only {
        // On standard error, where a command-line user sees it (this binary sets up no
        // logging); the config is then marked open on purpose, so it does not warn again.
        eprintln!(
            "warning: the dashboard on {bind} is open to everyone who reaches it, retry, cancel and delete \
             included: pass --read-only, or put it behind your own authenticating proxy"
        );
    }
    let mut config = crate::config::DashboardConfig::new(driver_for_url(url, 8)?).open_to_everyone();
    if let Some(replica) = replica_url {
        config = config.read_from(driver_for_url(replica, 8)?);
    }
    if read_only {
        config = config.authorize(|_: &actix_web::HttpRequest| crate::access::Access::ReadOnly);
    }
    let mount = mount.trim_end_matches('/').to_owned();
    let scope_path = mount.clone();
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new().service(crate::routes::scope(&scope_path, config.clone()))
    })
    // SIGTERM and SIGINT stop it (actix's signal handling), within 5 s even with browsers'
    // kept-alive connections open: a container's stop waits 10 s before it kills.
    .shutdown_timeout(5)
    .bind(bind)
    .map_err(|e| CliError::Invalid(format!("cannot listen on {bind}: {e}")))?;
    for addr in server.addrs() {
        writeln!(out, "jobs dashboard on http://{addr}{mount}/")?;
    }
    out.flush()?;
    server.run().await?;
    Ok(())
}
