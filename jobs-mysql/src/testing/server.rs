//! A throwaway MariaDB server started from the installed binaries (`mariadb-server`).
//!
//! Used by the test suite, the demo and the benchmark when no URL is given. The server
//! listens on 127.0.0.1 on a free port, keeps its data in a directory of its own, and
//! runs with durability off for tests ([`TEST_SETTINGS`]), on for the benchmark
//! ([`BENCH_SETTINGS`]). When the process runs as root, the server runs
//! as the `mysql` user (MariaDB refuses root).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use jobs_driver::process_wait::wait_until;
use jobs_driver::{DriverError as Error, Result};

/// The variable naming the directory that holds `mariadbd` and `mariadb-install-db`.
pub const BIN_DIR_VAR: &str = "JOBS_MARIADB_BIN";

/// The directory holding `mariadbd` and `mariadb-install-db`: [`BIN_DIR_VAR`], or the
/// first of `/usr/sbin`, `/usr/bin` and `/usr/local/bin` that has both.
pub fn find_server_binaries() -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var(BIN_DIR_VAR) {
        Ok(dir) if !dir.is_empty() => vec![PathBuf::from(dir)],
        _ => ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"]
            .iter()
            .map(PathBuf::from)
            .collect(),
    };
    for dir in &candidates {
        if dir.join("mariadbd").exists() && installer(dir).is_some() {
            return Ok(dir.clone());
        }
    }
    Err(server_error(format!(
        "no MariaDB server binaries (mariadbd, mariadb-install-db) in {candidates:?}: install them \
         (`apt-get install mariadb-server`, or run scripts/install-test-deps), set {BIN_DIR_VAR}, \
         or point MYSQL_URL at a server"
    )))
}

/// `mariadb-install-db`, next to `mariadbd` or in `/usr/bin`.
fn installer(dir: &Path) -> Option<PathBuf> {
    [dir.join("mariadb-install-db"), PathBuf::from("/usr/bin/mariadb-install-db")]
        .into_iter()
        .find(|p| p.exists())
}

fn server_error(what: impl Into<String>) -> Error {
    Error::Server(what.into())
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective uid).
fn running_as_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// Server options for a server only tests use: durability off (commits reach the log's
/// OS buffer, not the disk), no doublewrite.
pub const TEST_SETTINGS: &[&str] = &[
    "--innodb-flush-log-at-trx-commit=2",
    "--innodb-doublewrite=0",
    "--innodb-flush-method=nosync",
    "--sync-frm=0",
];

/// Server options for measuring: MariaDB's durable defaults (each commit flushed to the
/// disk, doublewrite on), a buffer pool that holds a benchmark's table.
pub const BENCH_SETTINGS: &[&str] = &["--innodb-flush-log-at-trx-commit=1", "--innodb-buffer-pool-size=1G"];

/// A MariaDB server in a directory of its own, on 127.0.0.1.
#[derive(Debug)]
pub struct MariaDbServer {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_mysql: bool,
    settings: Vec<String>,
    /// Stop the server and remove the directory when dropped.
    owned: bool,
}

impl MariaDbServer {
    /// Initialises and starts a new server in a fresh temporary directory; stopped and
    /// removed when dropped.
    pub fn start_private() -> Result<MariaDbServer> {
        MariaDbServer::start_private_with(TEST_SETTINGS)
    }

    /// [`start_private`](Self::start_private) with server options `settings`
    /// ([`TEST_SETTINGS`], [`BENCH_SETTINGS`], or others: `--name=value`).
    pub fn start_private_with(settings: &[&str]) -> Result<MariaDbServer> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "jobs-mariadb-{}-{}-{:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        ));
        let server = MariaDbServer::init(dir, settings, true)?;
        server.start()?;
        Ok(server)
    }

    /// The server shared by every test process of one run: the first to ask starts it
    /// (in `$TMPDIR/jobs-test-mariadb-<uid>`, under a file lock), later ones reuse it, and
    /// a watchdog stops it a few seconds after all of them (and their parents) exited.
    pub fn shared() -> Result<&'static MariaDbServer> {
        static SHARED: OnceLock<MariaDbServer> = OnceLock::new();
        if let Some(server) = SHARED.get() {
            return Ok(server);
        }
        let server = MariaDbServer::attach_or_start_shared()?;
        Ok(SHARED.get_or_init(|| server))
    }

    fn attach_or_start_shared() -> Result<MariaDbServer> {
        let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("jobs-test-mariadb-{uid}"));
        let lock_path = std::env::temp_dir().join(format!("jobs-test-mariadb-{uid}.lock"));
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
        lock.lock()?;
        let result = (|| {
            let port = fs::read_to_string(dir.join("port")).ok().and_then(|p| p.trim().parse::<u16>().ok());
            if let Some(port) = port
                && dir.join("watchdog.started").exists()
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                let server = MariaDbServer {
                    dir: dir.clone(),
                    bin: find_server_binaries()?,
                    port,
                    as_mysql: running_as_root(),
                    settings: TEST_SETTINGS.iter().map(|s| s.to_string()).collect(),
                    owned: false,
                };
                server.register_clients()?;
                return Ok(server);
            }
            if dir.exists() {
                if let Ok(pid) = fs::read_to_string(dir.join("mariadb.pid")) {
                    let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
                }
                fs::remove_dir_all(&dir)?;
            }
            let server = MariaDbServer::init(dir.clone(), TEST_SETTINGS, false)?;
            server.start()?;
            server.spawn_watchdog(&lock_path)?;
            server.register_clients()?;
            Ok(server)
        })();
        let _ = lock.unlock();
        result
    }

    fn init(dir: PathBuf, settings: &[&str], owned: bool) -> Result<MariaDbServer> {
        let bin = find_server_binaries()?;
        let as_mysql = running_as_root();
        fs::create_dir_all(&dir)?;
        let port = free_port()?;
        let settings = settings.iter().map(|s| s.to_string()).collect();
        let server = MariaDbServer { dir, bin, port, as_mysql, settings, owned };
        fs::write(server.dir.join("port"), port.to_string())?;
        if as_mysql {
            run(Command::new("chown").arg("-R").arg("mysql:").arg(&server.dir), "chown")?;
        }
        let installer =
            installer(&server.bin).ok_or_else(|| server_error("mariadb-install-db is missing"))?;
        let mut install = server.command(&installer);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", server.data_dir().display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .current_dir(&server.dir);
        if as_mysql {
            install.arg("--user=mysql");
        }
        run(&mut install, "mariadb-install-db")?;
        Ok(server)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `database`, as `root` (no password).
    pub fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    fn command(&self, program: &Path) -> Command {
        if self.as_mysql {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "mysql", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        }
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&self) -> Result<()> {
        let log = self.log();
        let ready_before =
            fs::read_to_string(&log).map(|l| l.matches("ready for connections").count()).unwrap_or(0);
        let mut cmd = self.command(&self.bin.join("mariadbd"));
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--socket={}", self.dir.join("mariadb.sock").display()))
            .arg(format!("--pid-file={}", self.dir.join("mariadb.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--skip-log-bin",
                "--performance-schema=OFF",
                "--max-connections=1000",
                "--innodb-buffer-pool-size=128M",
                "--innodb-log-file-size=256M",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
                "--default-time-zone=+00:00",
            ])
            // Later options win: the settings override the defaults above.
            .args(&self.settings)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of our process group, so that a Ctrl-C aimed at us does not hit it first.
            .process_group(0);
        if self.as_mysql {
            cmd.arg("--user=mysql");
        }
        let mut child = cmd.spawn()?;
        let started = wait_until("mariadbd to accept connections", Duration::from_secs(60), || {
            let ready =
                fs::read_to_string(&log).map(|l| l.matches("ready for connections").count()).unwrap_or(0);
            if ready > ready_before {
                return Ok(true);
            }
            match child.try_wait() {
                Ok(Some(status)) => Err(server_error(format!(
                    "mariadbd exited ({status}) before accepting connections; its log: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                ))),
                _ => Ok(false),
            }
        });
        if started.is_err() {
            let _ = child.kill();
        }
        started?;
        // Reap the server when it exits, so that it leaves no zombie behind.
        std::thread::spawn(move || child.wait());
        Ok(())
    }

    fn pid(&self) -> Option<String> {
        fs::read_to_string(self.dir.join("mariadb.pid")).ok().map(|p| p.trim().to_owned())
    }

    /// Stops the server (every session is cut) and waits until it has exited.
    pub fn stop(&self) -> Result<()> {
        let Some(pid) = self.pid() else { return Ok(()) };
        run(Command::new("kill").arg("-TERM").arg(&pid), "kill")?;
        wait_until(&format!("mariadbd (pid {pid}) to stop"), Duration::from_secs(60), || {
            Ok(!Path::new(&format!("/proc/{pid}")).exists() || !self.dir.join("mariadb.pid").exists())
        })
    }

    /// Kills the server without letting it shut down (a crash), and waits until it is gone.
    pub fn kill(&self) -> Result<()> {
        let Some(pid) = self.pid() else { return Ok(()) };
        run(Command::new("kill").arg("-KILL").arg(&pid), "kill")?;
        wait_until(&format!("mariadbd (pid {pid}) to die of SIGKILL"), Duration::from_secs(30), || {
            Ok(fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_none_or(|s| s.contains(") Z ")))
        })?;
        let _ = fs::remove_file(self.dir.join("mariadb.pid"));
        Ok(())
    }

    /// Restarts the server on the same port, dropping every connection.
    pub fn restart(&self) -> Result<()> {
        self.stop()?;
        self.start()
    }

    fn register_clients(&self) -> Result<()> {
        let mut file = OpenOptions::new().create(true).append(true).open(self.dir.join("clients"))?;
        writeln!(file, "{}", std::process::id())?;
        writeln!(file, "{}", std::os::unix::process::parent_id())?;
        Ok(())
    }

    fn spawn_watchdog(&self, lock_path: &Path) -> Result<()> {
        // Polls the registered processes; once none has been alive for three checks in a
        // row, kills the server and removes the directory, holding the same lock as a
        // process that attaches, so it never removes a server someone just joined.
        let script = r#"
dir="$1"; lock="$2"
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
    pid=$(cat "$dir/mariadb.pid" 2>/dev/null)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
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
            .arg("jobs-mariadb-watchdog")
            .arg(&self.dir)
            .arg(lock_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        cmd.spawn()?;
        File::create(self.dir.join("watchdog.started"))?;
        Ok(())
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        if self.owned {
            let _ = self.kill();
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// A port nobody listens on now (the kernel's pick).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(server_error(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}
