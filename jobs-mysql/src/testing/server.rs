//! A throwaway server started from the installed binaries: MariaDB (`mariadb-server`), or
//! MySQL where `JOBS_MYSQL_BIN` names its `mysqld` (see `binaries`).
//!
//! Used by the test suite, the demo and the benchmark when no URL is given. The server
//! listens on 127.0.0.1 on a free port, keeps its data in a directory of its own, and
//! runs with durability off for tests ([`TEST_SETTINGS`]), on for the benchmark
//! ([`BENCH_SETTINGS`]). When the process runs as root, the server runs
//! as the `mysql` user (both servers refuse root).

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use jobs_driver::Result;
use jobs_driver::test_server::{
    ServerUser, SharedDir, free_port, kill_pid_file, private_dir, run, wait_until,
};

use super::binaries::{Flavor, ServerBinaries, find_server_binaries, server_error};

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
    user: ServerUser,
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
        let dir = private_dir(flavor_name(find_server_binaries()?.flavor()))?;
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
        let shared = SharedDir::new(flavor_name(find_server_binaries()?.flavor()));
        let attach = |dir: &Path| {
            let port = fs::read_to_string(dir.join("port")).ok().and_then(|p| p.trim().parse::<u16>().ok());
            let Some(port) = port.filter(|&port| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
            else {
                return Ok(None);
            };
            Ok(Some(LocalServer {
                dir: dir.to_owned(),
                bin: find_server_binaries()?,
                port,
                user: ServerUser::new("mysql"),
                settings: TEST_SETTINGS.iter().map(|s| s.to_string()).collect(),
                owned: false,
            }))
        };
        let start = |dir: &Path| {
            let server = LocalServer::init(dir.to_owned(), TEST_SETTINGS, false)?;
            server.start()?;
            Ok(server)
        };
        shared.attach_or_start(attach, start, &kill_pid_file(&shared.path().join("server.pid")))
    }

    fn init(dir: PathBuf, settings: &[&str], owned: bool) -> Result<LocalServer> {
        let bin = find_server_binaries()?;
        let user = ServerUser::new("mysql");
        fs::create_dir_all(&dir)?;
        let port = free_port()?;
        let settings = settings.iter().map(|s| s.to_string()).collect();
        let server = LocalServer { dir, bin, port, user, settings, owned };
        fs::write(server.dir.join("port"), port.to_string())?;
        user.give(&server.dir)?;
        let (program, args) = server.bin.initialiser(&server.data_dir(), user.switches())?;
        run(user.command(&program).args(args).current_dir(&server.dir), "initialising the data directory")?;
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

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&self) -> Result<()> {
        let log = self.log();
        let ready_before =
            fs::read_to_string(&log).map(|l| l.matches("ready for connections").count()).unwrap_or(0);
        let mut cmd = self.user.command(self.bin.server());
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
        if self.user.switches() {
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
