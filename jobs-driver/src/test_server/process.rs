//! Processes and places of a test server: the user it runs as, the directory it keeps its
//! data in, the port it listens on, and the set-up commands run on its behalf.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{DriverError, Result};

/// Whether this process runs as root (the owner of `/proc/self` is the effective uid).
pub fn running_as_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// This process's effective uid (0 where `/proc` cannot be read).
pub(crate) fn effective_uid() -> u32 {
    fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

/// The system user a server runs as. Postgres, MariaDB, MySQL and PgBouncer refuse to run
/// as root: when this process is root, the server's commands run as `name` (through
/// `runuser`) and its directory is given to that user; otherwise they run as this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerUser {
    name: &'static str,
    switch: bool,
}

impl ServerUser {
    /// The server's own user `name` (`postgres`, `mysql`), switched to only when this
    /// process runs as root.
    pub fn new(name: &'static str) -> ServerUser {
        ServerUser { name, switch: running_as_root() }
    }

    /// The user's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether commands switch to the user (this process is root).
    pub fn switches(&self) -> bool {
        self.switch
    }

    /// A command that runs `program` as the server's user.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        if self.switch {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", self.name, "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        }
    }

    /// Gives `dir` and everything in it to the server's user (nothing to do when commands
    /// do not switch).
    pub fn give(&self, dir: &Path) -> Result<()> {
        if self.switch {
            run(Command::new("chown").arg("-R").arg(format!("{}:", self.name)).arg(dir), "chown")?;
        }
        Ok(())
    }
}

/// A new, empty directory of this process's own under the temporary directory:
/// `jobs-<what>-<pid>-<n>-<nonce>`, so that neither another process nor a leftover of a
/// dead one with the same pid has it.
pub fn private_dir(what: &str) -> Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    loop {
        let dir = std::env::temp_dir().join(format!(
            "jobs-{what}-{}-{}-{nonce:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
        ));
        match fs::create_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            created => return created.map(|()| dir).map_err(Into::into),
        }
    }
}

/// A port on 127.0.0.1 nobody listens on now (the kernel's pick).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}

/// Runs `cmd` to its end; a [`DriverError::Server`] naming `what`, with its output, unless
/// it succeeds.
pub fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(DriverError::Server(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_dirs_are_new_and_distinct() {
        let (a, b) = (private_dir("unit").expect("dir"), private_dir("unit").expect("dir"));
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        let _ = (fs::remove_dir(a), fs::remove_dir(b));
    }

    #[test]
    fn a_failed_command_is_an_error_with_its_output() {
        let err =
            run(Command::new("sh").args(["-c", "echo nope >&2; exit 3"]), "the check").expect_err("exit 3");
        let text = err.to_string();
        assert!(text.contains("the check failed") && text.contains("nope"), "{text}");
        run(&mut Command::new("true"), "true").expect("success");
    }

    #[test]
    fn commands_switch_user_only_as_root() {
        let user = ServerUser::new("postgres");
        let cmd = user.command("initdb");
        let program = cmd.get_program().to_string_lossy().into_owned();
        assert_eq!(program == "runuser", running_as_root(), "{program}");
        assert_eq!(user.switches(), running_as_root());
    }
}
