//! [`SharedDir`]: the one server all the test processes of a run share.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::time::Duration;

use super::process::effective_uid;
use super::wait::wait_until;
use crate::error::Result;

/// The watchdog: polls the registered processes; once none has been alive for three
/// checks in a row, runs the stop command and removes the directory, holding the same lock
/// as a process that attaches, so that it never removes a server someone just joined.
const WATCHDOG: &str = r#"
dir="$1"; lock="$2"; shift 2
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
    "$@" >/dev/null 2>&1
    rm -rf "$dir"
    flock -u 9
    exit 0
  fi
  flock -u 9
  exec 9>&-
done
"#;

/// The directory of the server every test process of one run shares
/// (`$TMPDIR/jobs-test-<name>-<uid>`), and the lock file beside it.
///
/// The first process to ask starts the server; later ones, other test binaries of the
/// same `cargo test` included, join it. Each registers itself and its parent (cargo,
/// rustdoc or nextest) in the directory's `clients`, and a watchdog stops the server and
/// removes the directory a few seconds after all of them have exited. A server whose
/// watchdog is gone (killed with the machine's session, say) is stopped and replaced, so
/// that no server outlives its run unwatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedDir {
    dir: PathBuf,
    lock: PathBuf,
}

impl SharedDir {
    /// The shared directory of the servers called `name` (`pg`, `mariadb`, `mysql`) of
    /// this user.
    pub fn new(name: &str) -> SharedDir {
        let uid = effective_uid();
        let tmp = std::env::temp_dir();
        SharedDir {
            dir: tmp.join(format!("jobs-test-{name}-{uid}")),
            lock: tmp.join(format!("jobs-test-{name}-{uid}.lock")),
        }
    }

    /// The directory (the server's data and files go inside).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The server in the directory, started if need be, under the lock:
    ///
    /// - if an earlier process started one whose watchdog still runs, `attach` looks at it
    ///   and returns it when it answers;
    /// - otherwise the old watchdog, if any, is killed, `stop` stops whatever server is left
    ///   (its failure is ignored), the directory is removed, `start` makes a new server in
    ///   it, and a watchdog that will run `stop` is started.
    ///
    /// Either way this process and its parent are registered as clients. `stop` is run
    /// by its program and arguments only (not its environment or directory).
    pub fn attach_or_start<T>(
        &self,
        attach: impl FnOnce(&Path) -> Result<Option<T>>,
        start: impl FnOnce(&Path) -> Result<T>,
        stop: &Command,
    ) -> Result<T> {
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&self.lock)?;
        lock.lock()?;
        let result = self.attach_or_start_locked(attach, start, stop);
        let _ = lock.unlock();
        result
    }

    fn attach_or_start_locked<T>(
        &self,
        attach: impl FnOnce(&Path) -> Result<Option<T>>,
        start: impl FnOnce(&Path) -> Result<T>,
        stop: &Command,
    ) -> Result<T> {
        let watchdog = self.watchdog_pid().filter(|&pid| self.is_watchdog(pid));
        if watchdog.is_some()
            && let Some(server) = attach(&self.dir)?
        {
            self.register_clients()?;
            return Ok(server);
        }
        if self.dir.exists() {
            if let Some(pid) = watchdog {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).stderr(Stdio::null()).status();
            }
            let _ =
                argv_command(stop).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
            // A server killed a moment ago may still be writing its last files.
            wait_until("the old test server's directory to be removed", Duration::from_secs(30), || {
                Ok(fs::remove_dir_all(&self.dir).is_ok() || !self.dir.exists())
            })?;
        }
        fs::create_dir_all(&self.dir)?;
        let server = start(&self.dir)?;
        self.spawn_watchdog(stop)?;
        self.register_clients()?;
        Ok(server)
    }

    /// Whether process `pid` is alive and this directory's watchdog (not another process
    /// that took its pid, nor another directory's watchdog).
    ///
    /// A process caught in the middle of its `exec` (the watchdog a moment after `spawn`
    /// returned: the parent resumes once the new program's memory is in place, before its
    /// arguments are) shows an empty command line; it is read again until it has one. One
    /// that still shows none after a while, and is not a zombie, is taken for the
    /// watchdog: attaching to a server nobody watches costs less than replacing one that
    /// tests are using.
    fn is_watchdog(&self, pid: u32) -> bool {
        let mut own = Vec::from(WATCHDOG_NAME.as_bytes());
        own.push(0);
        own.extend_from_slice(self.dir.as_os_str().as_encoded_bytes());
        own.push(0);
        let mut watchdog = true;
        let _ = wait_until("a process's command line", Duration::from_secs(5), || {
            let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
                watchdog = false;
                return Ok(true);
            };
            if cmdline.is_empty() {
                // A zombie has none and never will.
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
                watchdog = !matches!(state, None | Some('Z' | 'X'));
                return Ok(!watchdog);
            }
            watchdog = cmdline.windows(own.len()).any(|w| w == own.as_slice());
            Ok(true)
        });
        watchdog
    }

    /// The pid of the directory's watchdog, once it has written it.
    fn watchdog_pid(&self) -> Option<u32> {
        fs::read_to_string(self.dir.join("watchdog.pid")).ok()?.trim().parse().ok()
    }

    fn register_clients(&self) -> Result<()> {
        let mut file = OpenOptions::new().create(true).append(true).open(self.dir.join("clients"))?;
        writeln!(file, "{}", std::process::id())?;
        writeln!(file, "{}", std::os::unix::process::parent_id())?;
        Ok(())
    }

    fn spawn_watchdog(&self, stop: &Command) -> Result<()> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(WATCHDOG)
            .arg(WATCHDOG_NAME)
            .arg(&self.dir)
            .arg(&self.lock)
            .arg(stop.get_program())
            .args(stop.get_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Out of our process group, so that a Ctrl-C aimed at the tests does not stop
            // the server under another test binary still using it.
            .process_group(0);
        let watchdog = cmd.spawn()?;
        fs::write(self.dir.join("watchdog.pid"), watchdog.id().to_string())?;
        Ok(())
    }
}

/// A command that kills (SIGKILL) the process whose pid `pid_file` holds, if any: the stop
/// command of a server that writes a pid file and needs no clean shutdown.
pub fn kill_pid_file(pid_file: &Path) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"pid=$(cat "$1" 2>/dev/null) && [ -n "$pid" ] && kill -9 "$pid""#, "kill-pid-file"])
        .arg(pid_file);
    cmd
}

/// The watchdog's `$0`, by which [`SharedDir::is_watchdog`] knows it (with its directory).
const WATCHDOG_NAME: &str = "jobs-test-server-watchdog";

/// `cmd`'s program and arguments, as a new command.
fn argv_command(cmd: &Command) -> Command {
    let mut copy = Command::new(cmd.get_program());
    copy.args(cmd.get_args());
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{private_dir, run};

    fn shared_in(parent: &Path) -> SharedDir {
        SharedDir { dir: parent.join("shared"), lock: parent.join("shared.lock") }
    }

    #[test]
    fn the_first_starts_the_next_attaches_and_the_watchdog_stops_it_after_the_last() {
        let parent = private_dir("shared-unit").expect("dir");
        let shared = shared_in(&parent);
        let stopped = parent.join("stopped");
        let mut stop = Command::new("touch");
        stop.arg(&stopped);
        // The first start: nothing to attach to.
        let started: u32 = shared
            .attach_or_start(|_| panic!("nothing to attach to yet"), |dir| Ok(u32::from(dir.exists())), &stop)
            .expect("started");
        assert_eq!(started, 1);
        // The next attaches to what is there.
        let attached =
            shared.attach_or_start(|_| Ok(Some(2)), |_| panic!("must attach"), &stop).expect("attached");
        assert_eq!(attached, 2);
        // A server that does not answer is stopped and replaced.
        let replaced = shared.attach_or_start(|_| Ok(None), |_| Ok(3), &stop).expect("replaced");
        assert_eq!(replaced, 3);
        assert!(stopped.exists(), "the stop command ran on the server left behind");
        fs::remove_file(&stopped).expect("reset");
        // A server whose watchdog died is stopped and replaced, though it answers: nothing
        // would ever stop it.
        let old_watchdog = shared.watchdog_pid().expect("a watchdog pid");
        run(Command::new("kill").arg("-9").arg(old_watchdog.to_string()), "kill").expect("killed");
        wait_until("the watchdog to die", Duration::from_secs(10), || Ok(!shared.is_watchdog(old_watchdog)))
            .expect("dead");
        let unwatched = shared.attach_or_start(|_| Ok(Some(4)), |_| Ok(5), &stop).expect("replaced");
        assert_eq!(unwatched, 5);
        assert!(stopped.exists(), "the stop command ran on the unwatched server");
        assert!(shared.watchdog_pid().is_some_and(|pid| shared.is_watchdog(pid)), "a new watchdog runs");
        fs::remove_file(&stopped).expect("reset");
        // This process's clients stay alive, so the watchdog waits; a client list of dead
        // processes only lets it stop the server and remove the directory.
        fs::write(shared.path().join("clients"), "999999999\n").expect("clients");
        wait_until("the watchdog to stop the server", Duration::from_secs(30), || {
            Ok(stopped.exists() && !shared.path().exists())
        })
        .expect("stopped");
        let _ = fs::remove_dir_all(&parent);
    }

    #[test]
    fn a_pid_file_kill_kills_that_process_and_tolerates_no_file() {
        let parent = private_dir("kill-unit").expect("dir");
        let mut child = Command::new("sleep").arg("600").spawn().expect("sleep");
        let pid_file = parent.join("server.pid");
        fs::write(&pid_file, child.id().to_string()).expect("pid");
        assert!(kill_pid_file(&pid_file).status().expect("ran").success());
        let status = child.wait().expect("reaped");
        assert!(!status.success(), "killed: {status}");
        let _ = kill_pid_file(&parent.join("none.pid")).status().expect("runs without a file");
        let _ = fs::remove_dir_all(&parent);
    }
}
