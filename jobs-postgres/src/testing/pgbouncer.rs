//! A throwaway PgBouncer in transaction mode in front of a test server.
//!
//! Started from the installed `pgbouncer` binary (Debian's is 1.18: no prepared statements
//! of its own, no LISTEN, no session state), listening on a Unix socket in a directory of
//! its own. Every database of the server is reachable through it, so each test's database
//! is. It is stopped and its directory removed when dropped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use jobs_driver::test_server::{ServerUser, private_dir, wait_until};
use jobs_driver::{DriverError as Error, Result};

/// The environment variable naming the `pgbouncer` binary (default: `pgbouncer` on the
/// `PATH`, then `/usr/sbin/pgbouncer`).
pub const PGBOUNCER_VAR: &str = "JOBS_PGBOUNCER";

/// The port in the socket's name (`.s.PGSQL.6432`); nothing listens on TCP.
const PORT: u16 = 6432;

/// A PgBouncer process in transaction mode.
#[derive(Debug)]
pub struct PgBouncer {
    dir: PathBuf,
    child: Child,
    user: String,
}

/// Where a server is reached, read from a connection URL.
struct Upstream {
    host: String,
    port: String,
    user: String,
    password: Option<String>,
}

fn upstream(url: &str) -> Result<Upstream> {
    let bad = || Error::Server(format!("cannot put PgBouncer in front of {url:?}: not a postgres:// URL"));
    let rest = url.split_once("://").map(|(_, rest)| rest).ok_or_else(bad)?;
    let (head, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, _database) = head.split_once('/').unwrap_or((head, ""));
    let (credentials, hostport) = authority.rsplit_once('@').unwrap_or(("postgres", authority));
    let (user, password) = match credentials.split_once(':') {
        Some((user, password)) => (user.to_owned(), Some(password.to_owned())),
        None => (credentials.to_owned(), None),
    };
    let (mut host, mut port) = match hostport.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.to_owned()),
        None => (hostport.to_owned(), "5432".to_owned()),
    };
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("host", value)) => host = value.to_owned(),
            Some(("port", value)) => port = value.to_owned(),
            _ => {}
        }
    }
    if host.is_empty() {
        return Err(bad());
    }
    Ok(Upstream { host, port, user, password })
}

fn binary() -> PathBuf {
    if let Ok(path) = std::env::var(PGBOUNCER_VAR)
        && !path.is_empty()
    {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("pgbouncer"))
        .find(|candidate| candidate.is_file());
    on_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/pgbouncer"))
}

/// Settings that keep a newer PgBouncer as bare as 1.18: from 1.21 it can track prepared
/// statements itself (`max_prepared_statements`, on by default from 1.24), which would hide
/// exactly what these tests check. 1.18 rejects the setting, so it is written only for
/// versions that know it.
fn version_settings(binary: &Path) -> String {
    let version = Command::new(binary).arg("--version").output().ok();
    let text = version.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let numbers: Vec<u32> = text
        .split_whitespace()
        .nth(1)
        .map(|v| v.split('.').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    match numbers.as_slice() {
        [major, minor, ..] if (*major, *minor) >= (1, 21) => "max_prepared_statements = 0\n".to_owned(),
        _ => String::new(),
    }
}

impl PgBouncer {
    /// Starts a PgBouncer in transaction mode in front of the server of `database_url`
    /// (any of its databases), lending at most `server_connections` server connections per
    /// database: fewer than the clients, so that clients share them as in production.
    pub fn start_in_front_of(database_url: &str, server_connections: usize) -> Result<PgBouncer> {
        let upstream = upstream(database_url)?;
        let dir = private_dir("pgbouncer")?;
        let password = upstream.password.as_ref().map(|p| format!(" password={p}")).unwrap_or_default();
        let config = format!(
            "[databases]\n\
             * = host={host} port={port} user={user}{password}\n\
             [pgbouncer]\n\
             listen_addr =\n\
             listen_port = {PORT}\n\
             unix_socket_dir = {dir}\n\
             auth_type = any\n\
             admin_users = {user}\n\
             pool_mode = transaction\n\
             default_pool_size = {pool}\n\
             max_client_conn = 2000\n\
             listen_backlog = 1024\n\
             max_db_connections = 0\n\
             log_connections = 0\n\
             log_disconnections = 0\n\
             logfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\n\
             {newer}",
            host = upstream.host,
            port = upstream.port,
            user = upstream.user,
            pool = server_connections.max(1),
            dir = dir.display(),
            newer = version_settings(&binary()),
        );
        fs::write(dir.join("pgbouncer.ini"), config)?;
        let mut cmd = Command::new(binary());
        let user = ServerUser::new("postgres");
        if user.switches() {
            // PgBouncer refuses to run as root; it switches to this user itself.
            user.give(&dir)?;
            cmd.args(["-u", user.name()]);
        }
        let child = cmd
            .arg(dir.join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::Server(format!("cannot start pgbouncer ({}): {e}", binary().display())))?;
        let mut bouncer = PgBouncer { dir, child, user: upstream.user };
        bouncer.wait_until_listening()?;
        Ok(bouncer)
    }

    fn wait_until_listening(&mut self) -> Result<()> {
        let socket = self.dir.join(format!(".s.PGSQL.{PORT}"));
        let (child, dir) = (&mut self.child, &self.dir);
        // The socket file appears when it is bound, a moment before it accepts: wait until
        // a connection is accepted.
        wait_until("pgbouncer to accept connections", Duration::from_secs(10), || {
            if let Some(status) = child.try_wait()? {
                let log = fs::read_to_string(dir.join("pgbouncer.log")).unwrap_or_default();
                return Err(Error::Server(format!("pgbouncer exited ({status}): {log}")));
            }
            Ok(std::os::unix::net::UnixStream::connect(&socket).is_ok())
        })
    }

    /// The directory of its socket, config and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A URL for `database` through this PgBouncer.
    pub fn url(&self, database: &str) -> String {
        format!("postgresql://{}@localhost/{database}?host={}&port={PORT}", self.user, self.dir.display())
    }

    /// What PgBouncer logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_are_read_from_socket_and_tcp_urls() {
        let socket = upstream("postgresql://postgres@localhost/db?host=/tmp/x").expect("parsed");
        assert_eq!(
            (socket.host.as_str(), socket.port.as_str(), socket.user.as_str()),
            ("/tmp/x", "5432", "postgres")
        );
        let tcp = upstream("postgres://app:secret@db.internal:5433/app").expect("parsed");
        assert_eq!((tcp.host.as_str(), tcp.port.as_str(), tcp.user.as_str()), ("db.internal", "5433", "app"));
        assert_eq!(tcp.password.as_deref(), Some("secret"));
        assert!(upstream("mysql//x").is_err());
    }
}
