//! A throwaway server started from the installed binaries: MariaDB (`mariadb-server`), or
//! MySQL where `JOBS_MYSQL_BIN` names its `mysqld` (see `binaries`).
//!
//! Used by the test suite, the demo and the benchmark when no URL is given. The server
//! listens on 127.0.0.1 on a free port, keeps its data in a directory of its own, and
//! runs with durability off for tests ([`TEST_SETTINGS`]), on for the benchmark
//! ([`BENCH_SETTINGS`]). When the process runs as root, the server runs
//! as the `mysql` user (both servers refuse root).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use jobs_driver::Result;
use jobs_driver::process_wait::wait_until;

use super::binaries::{Flavor, ServerBinaries, find_server_binaries, server_error};

/// Whether this process runs as root (the owner of `/proc/self` is the effective uid).
fn running_as_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// Server options for a server only tests use: durability off (commits reach the log's
/// OS buffer, not the disk), no doublewrite.
pub const TEST_SETTINGS: &[&str] =
    &["--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0", "--innodb-flush-method=nosync"];

/// Server options for measuring: the durable defaults (each commit flushed to the
/// disk, doublewrite on), a buffer pool that holds a benchmark's table.
pub const BENCH_SETTINGS: &[&str] = &["--innodb-flush-log-at-trx-commit=1", "--innodb-buffer-pool-size=1G"];

/// A MariaDB or MySQL server in a directory of its own, on 127.0.0.1.
#[derive(Debug)]
pub struct LocalServer {
    dir: PathBuf,
    bin: ServerBinaries,
    port: u16,
    as_mysql: bool,
    settings: Vec<String>,
    /// Stop the server and remove the directory when dropped.
    owned: bool,
}

impl LocalServer {
    /// Initialises and starts a new server in a fresh temporary directory; stopped and
    /// removed when dropped.
    pub fn start_private() -> Result<LocalServer> {
        LocalServer::start_private_with(TEST_SETTINGS)
    }

    /// [`start_private`](Self::start_private) with server options `settings`
    /// ([`TEST_SETTINGS`], [`BENCH_SETTINGS`], or others: `--name=value`).
    pub fn start_private_with(settings: &[&str]) -> Result<LocalServer> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "jobs-{}-{}-{}-{:08x}",
            flavor_name(find_server_binaries()?.flavor()),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            rand::random::<u32>()
        ));
        let server = LocalServer::init(dir, settings, true)?;
        server.start()?;
        Ok(server)
    }

    /// The server shared by every test process of one run: the first to ask starts it
    /// (in `$TMPDIR/jobs-test-<mariadb|mysql>-<uid>`, under a file lock), later ones reuse it, and
    /// a watchdog stops it a few seconds after all of them (and their parents) exited.
    pub fn shared() -> Result<&'static LocalServer> {
        static SHARED: OnceLock<LocalServer> = OnceLock::new();
        if let Some(server) = SHARED.get() {
            return Ok(server);
        }
        let server = LocalServer::attach_or_start_shared()?;
        Ok(SHARED.get_or_init(|| server))
    }

    fn attach_or_start_shared() -> Result<LocalServer> {
        let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
        let flavor = flavor_name(find_server_binaries()?.flavor());
        let dir = std::env::temp_dir().join(format!("jobs-test-{flavor}-{uid}"));
        let lock_path = std::env::temp_dir().join(format!("jobs-test-{flavor}-{uid}.lock"));
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
        lock.lock()?;
        let result = (|| {
            let port = fs::read_to_string(dir.join("port")).ok().and_then(|p| p.trim().parse::<u16>().ok());
            if let Some(port) = port
                && dir.join("watchdog.started").exists()
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                let server = LocalServer {
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
                if let Ok(pid) = fs::read_to_string(dir.join("server.pid")) {
                    let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
                }
                fs::remove_dir_all(&dir)?;
            }
            let server = LocalServer::init(dir.clone(), TEST_SETTINGS, false)?;
            server.start()?;
            server.spawn_watchdog(&lock_path)?;
            server.register_clients()?;
            Ok(server)
        })();
        let _ = lock.unlock();
        result
    }

    fn init(dir: PathBuf, settings: &[&str], owned: bool) -> Result<LocalServer> {
        let bin = find_server_binaries()?;
        let as_mysql = running_as_root();
        fs::create_dir_all(&dir)?;
        let port = free_port()?;
        let settings = settings.iter().map(|s| s.to_string()).collect();
        let server = LocalServer { dir, bin, port, as_mysql, settings, owned };
        fs::write(server.dir.join("port"), port.to_string())?;
        if as_mysql {
            run(Command::new("chown").arg("-R").arg("mysql:").arg(&server.dir), "chown")?;
        }
        let (program, args) = server.bin.initialiser(&server.data_dir(), as_mysql)?;
        run(server.command(&program).args(args).current_dir(&server.dir), "initialising the data directory")?;
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
        let mut cmd = self.command(&self.bin.server());
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--socket={}", self.dir.join("server.sock").display()))
            .arg(format!("--pid-file={}", self.dir.join("server.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--port={}", self.port))
            .args(self.bin.own_options())
            .args([
                "--bind-address=127.0.0.1",
                "--skip-log-bin",
                "--performance-schema=OFF",
                "--max-connections=1000",
                "--innodb-buffer-pool-size=128M",
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
        let started = wait_until("the server to accept connections", Duration::from_secs(60), || {
            let ready =
                fs::read_to_string(&log).map(|l| l.matches("ready for connections").count()).unwrap_or(0);
            if ready > ready_before {
                return Ok(true);
            }
            match child.try_wait() {
                Ok(Some(status)) => Err(server_error(format!(
                    "{} exited ({status}) before accepting connections; its log: {}",
                    self.bin.server().display(),
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
        fs::read_to_string(self.dir.join("server.pid")).ok().map(|p| p.trim().to_owned())
    }

    /// Stops the server (every session is cut) and waits until it has exited.
    pub fn stop(&self) -> Result<()> {
        let Some(pid) = self.pid() else { return Ok(()) };
        run(Command::new("kill").arg("-TERM").arg(&pid), "kill")?;
        wait_until(&format!("the server (pid {pid}) to stop"), Duration::from_secs(60), || {
            Ok(!Path::new(&format!("/proc/{pid}")).exists() || !self.dir.join("server.pid").exists())
        })
    }

    /// Kills the server without letting it shut down (a crash), and waits until it is gone.
    pub fn kill(&self) -> Result<()> {
        let Some(pid) = self.pid() else { return Ok(()) };
        run(Command::new("kill").arg("-KILL").arg(&pid), "kill")?;
        wait_until(&format!("the server (pid {pid}) to die of SIGKILL"), Duration::from_secs(30), || {
            Ok(fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_none_or(|s| s.contains(") Z ")))
        })?;
        let _ = fs::remove_file(self.dir.join("server.pid"));
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
    pid=$(cat "$dir/server.pid" 2>/dev/null)
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
            .arg("jobs-mysql-watchdog")
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

impl Drop for LocalServer {
    fn drop(&mut self) {
        if self.owned {
            let _ = self.kill();
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The flavor's name in directory names.
fn flavor_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::MariaDb => "mariadb",
        Flavor::Mysql => "mysql",
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
