//! A throwaway Postgres cluster started from the installed server binaries.
//!
//! Used by the test suite, the demo and the benchmark when `DATABASE_URL` is unset. The
//! server listens on a Unix socket only, inside the cluster's own directory, so clusters
//! never fight over a port. When the process runs as root, the server runs as the
//! `postgres` user (Postgres refuses to run as root).

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jobs_driver::Result;
use jobs_driver::test_server::{ServerUser, SharedDir, private_dir, run};

pub use super::binaries::{BIN_DIR_VAR, find_server_binaries};

// `PgCluster::start_replica`: a child module, for the cluster's private fields.
#[path = "replica.rs"]
mod replica;

/// Server settings for a cluster that only tests use: durability off, room for many
/// connections, a short autovacuum naptime.
pub const TEST_SETTINGS: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "500"),
    ("shared_buffers", "128MB"),
    ("autovacuum_naptime", "5s"),
    ("idle_in_transaction_session_timeout", "5min"),
];

/// A Postgres cluster in a directory of its own, reachable through a Unix socket there.
#[derive(Debug)]
pub struct PgCluster {
    dir: PathBuf,
    bin: PathBuf,
    user: ServerUser,
    settings: Vec<(String, String)>,
    /// Stop the server and remove the directory when dropped.
    owned: bool,
}

impl PgCluster {
    /// `DATABASE_URL` when set (and no cluster), otherwise a private cluster started with
    /// `settings` and its URL. Keep the cluster alive as long as the URL is used.
    pub fn from_env_or_private(settings: &[(&str, &str)]) -> Result<(Option<PgCluster>, String)> {
        if let Ok(url) = std::env::var("DATABASE_URL")
            && !url.is_empty()
        {
            return Ok((None, url));
        }
        let cluster = PgCluster::start_private(settings)?;
        let url = cluster.admin_url();
        Ok((Some(cluster), url))
    }

    /// Initialises and starts a new cluster in a fresh temporary directory. The server is
    /// stopped and the directory removed when the value is dropped.
    pub fn start_private(settings: &[(&str, &str)]) -> Result<PgCluster> {
        let cluster = PgCluster::init(private_dir("pg")?, settings, true)?;
        cluster.start()?;
        Ok(cluster)
    }

    /// The cluster shared by every test process of one run.
    ///
    /// The first process to ask starts it (in `$TMPDIR/jobs-test-pg-<uid>`, under a file
    /// lock); later ones, including other test binaries of the same `cargo test`, reuse
    /// it. Each registers itself and its parent (cargo, rustdoc or nextest) with a small
    /// watchdog that stops the server and removes the directory a few seconds after all
    /// of them have exited.
    pub fn shared() -> Result<&'static PgCluster> {
        static SHARED: OnceLock<PgCluster> = OnceLock::new();
        if let Some(cluster) = SHARED.get() {
            return Ok(cluster);
        }
        let cluster = PgCluster::attach_or_start_shared()?;
        Ok(SHARED.get_or_init(|| cluster))
    }

    fn attach_or_start_shared() -> Result<PgCluster> {
        let shared = SharedDir::new("pg");
        let left = PgCluster::in_dir(shared.path().to_owned(), TEST_SETTINGS, false)?;
        let mut stop = left.command("pg_ctl");
        stop.arg("-D").arg(left.data_dir()).args(["-m", "immediate", "stop"]);
        let attach = |dir: &Path| {
            let cluster = PgCluster::in_dir(dir.to_owned(), TEST_SETTINGS, false)?;
            Ok(cluster.is_running().then_some(cluster))
        };
        let start = |dir: &Path| {
            let cluster = PgCluster::init(dir.to_owned(), TEST_SETTINGS, false)?;
            cluster.start()?;
            Ok(cluster)
        };
        shared.attach_or_start(attach, start, &stop)
    }

    /// The cluster that is or will be in `dir` (nothing is done to it).
    fn in_dir(dir: PathBuf, settings: &[(&str, &str)], owned: bool) -> Result<PgCluster> {
        Ok(PgCluster {
            dir,
            bin: find_server_binaries()?,
            user: ServerUser::new("postgres"),
            settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            owned,
        })
    }

    fn init(dir: PathBuf, settings: &[(&str, &str)], owned: bool) -> Result<PgCluster> {
        fs::create_dir_all(&dir)?;
        let cluster = PgCluster::in_dir(dir, settings, owned)?;
        cluster.user.give(&cluster.dir)?;
        let data = cluster.data_dir();
        let mut initdb = cluster.command("initdb");
        initdb.arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]);
        run(&mut initdb, "initdb")?;
        Ok(cluster)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The directory holding the server's socket (and its data).
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// A connection URL for `database` on this cluster, as the `postgres` superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgresql://postgres@localhost/{database}?host={}", self.dir.display())
    }

    /// A connection URL for the maintenance database.
    pub fn admin_url(&self) -> String {
        self.url("postgres")
    }

    fn command(&self, program: &str) -> Command {
        let mut path = self.bin.join(program);
        if !path.exists()
            && let Ok(initdb) = fs::canonicalize(self.bin.join("initdb"))
            && let Some(real_bin) = initdb.parent()
        {
            // `bin` holds links to the server programs only (initdb, pg_ctl, postgres):
            // the others (pg_basebackup) are beside what they point to.
            path = real_bin.join(program);
        }
        self.user.command(path)
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<()> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D").arg(self.data_dir()).args(args);
        run(&mut cmd, &format!("pg_ctl {}", args.join(" ")))
    }

    fn server_options(&self) -> String {
        let mut options = format!("-k {} -c listen_addresses=''", self.dir.display());
        for (key, value) in &self.settings {
            options.push_str(&format!(" -c {key}={value}"));
        }
        options
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&self) -> Result<()> {
        let log = self.dir.join("server.log");
        let options = self.server_options();
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "-o"])
            .arg(options)
            .arg("start")
            // pg_ctl leaves the server running after it exits; keep it out of our
            // process group so a Ctrl-C aimed at us does not hit it first.
            .process_group(0);
        run(&mut cmd, "pg_ctl start")
    }

    /// Stops the server (fast shutdown: sessions are disconnected).
    pub fn stop(&self) -> Result<()> {
        self.pg_ctl(&["stop", "-m", "fast", "-w"])
    }

    /// Restarts the server, dropping every connection (fault-injection tests).
    pub fn restart(&self) -> Result<()> {
        let options = self.server_options();
        let log = self.dir.join("server.log");
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-m", "fast", "-w", "-t", "60", "-o"])
            .arg(options)
            .arg("restart")
            .process_group(0);
        run(&mut cmd, "pg_ctl restart")
    }

    /// Whether the server is up.
    pub fn is_running(&self) -> bool {
        self.data_dir().join("postmaster.pid").exists() && self.pg_ctl(&["status"]).is_ok()
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.owned {
            let _ = self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
