//! A throwaway Postgres cluster started from the installed server binaries.
//!
//! Used by the test suite, the demo and the benchmark when `DATABASE_URL` is unset. The
//! server listens on a Unix socket only, inside the cluster's own directory, so clusters
//! never fight over a port. When the process runs as root, the server runs as the
//! `postgres` user (Postgres refuses to run as root).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use jobs_driver::{DriverError as Error, Result};

pub use super::server_binaries::{BIN_DIR_VAR, find_server_binaries};

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
    as_postgres: bool,
    settings: Vec<(String, String)>,
    /// Stop the server and remove the directory when dropped.
    owned: bool,
}

fn cluster_error(what: impl Into<String>) -> Error {
    Error::Server(what.into())
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective uid).
pub(crate) fn running_as_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
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
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "jobs-pg-{}-{}-{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        ));
        let cluster = PgCluster::init(dir, settings, true)?;
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
        let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("jobs-test-pg-{uid}"));
        let lock_path = std::env::temp_dir().join(format!("jobs-test-pg-{uid}.lock"));
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
        lock.lock()?;
        let result = (|| {
            let settings = TEST_SETTINGS;
            let cluster = PgCluster {
                dir: dir.clone(),
                bin: find_server_binaries()?,
                as_postgres: running_as_root(),
                settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                owned: false,
            };
            if !(dir.join("watchdog.started").exists() && cluster.is_running()) {
                if dir.exists() {
                    let _ = cluster.pg_ctl(&["stop", "-m", "immediate"]);
                    fs::remove_dir_all(&dir)?;
                }
                let cluster = PgCluster::init(dir.clone(), settings, false)?;
                cluster.start()?;
                cluster.spawn_watchdog(&lock_path)?;
            }
            cluster.register_clients()?;
            Ok(cluster)
        })();
        let _ = lock.unlock();
        result
    }

    fn init(dir: PathBuf, settings: &[(&str, &str)], owned: bool) -> Result<PgCluster> {
        let bin = find_server_binaries()?;
        let as_postgres = running_as_root();
        fs::create_dir_all(&dir)?;
        let cluster = PgCluster {
            dir,
            bin,
            as_postgres,
            settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            owned,
        };
        if as_postgres {
            cluster.run(Command::new("chown").arg("postgres:").arg(&cluster.dir), "chown")?;
        }
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
        cluster.run(&mut initdb, "initdb")?;
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
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn run(&self, cmd: &mut Command, what: &str) -> Result<()> {
        let out = cmd.stdin(Stdio::null()).output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(cluster_error(format!(
                "{what} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<()> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D").arg(self.data_dir()).args(args);
        self.run(&mut cmd, &format!("pg_ctl {}", args.join(" ")))
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
        self.run(&mut cmd, "pg_ctl start")
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
        self.run(&mut cmd, "pg_ctl restart")
    }

    /// Whether the server is up.
    pub fn is_running(&self) -> bool {
        self.data_dir().join("postmaster.pid").exists() && self.pg_ctl(&["status"]).is_ok()
    }

    fn register_clients(&self) -> Result<()> {
        let mut file = OpenOptions::new().create(true).append(true).open(self.dir.join("clients"))?;
        writeln!(file, "{}", std::process::id())?;
        writeln!(file, "{}", std::os::unix::process::parent_id())?;
        Ok(())
    }

    fn spawn_watchdog(&self, lock_path: &Path) -> Result<()> {
        // Polls the registered processes; once none has been alive for three checks in a
        // row, stops the server and removes the directory, holding the same lock as a
        // process that attaches, so it never removes a cluster someone just joined.
        let script = r#"
dir="$1"; lock="$2"; pgctl="$3"; as_pg="$4"
idle=0
while sleep 1; do
  exec 9>>"$lock"
  flock 9
  alive=0
  for pid in $(cat "$dir/clients" 2>/dev/null); do
    if [ -d "/proc/$pid" ]; then alive=1; break; fi
  done
  if [ "$alive" = 1 ]; then idle=0; else idle=$((idle + 1)); fi
  if [ "$idle" -ge 3 ]; then
    if [ "$as_pg" = 1 ]; then runuser -u postgres -- "$pgctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
    else "$pgctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1; fi
    rm -rf "$dir"
    flock -u 9
    exit 0
  fi
  flock -u 9
  exec 9>&-
done
"#;
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .arg("jobs-pg-watchdog")
            .arg(&self.dir)
            .arg(lock_path)
            .arg(self.bin.join("pg_ctl"))
            .arg(if self.as_postgres { "1" } else { "0" })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        cmd.spawn()?;
        File::create(self.dir.join("watchdog.started"))?;
        Ok(())
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
