//! The binaries a throwaway server starts from: MariaDB's (`mariadbd` and
//! `mariadb-install-db`, Debian's `mariadb-server`) or MySQL's (`mysqld`, e.g. from
//! `scripts/fetch-mysql`), and what the two servers need differently.

use std::path::{Path, PathBuf};

use jobs_driver::{DriverError, Result};

/// The variable naming the directory that holds `mariadbd` and `mariadb-install-db`.
pub const BIN_DIR_VAR: &str = "JOBS_MARIADB_BIN";

/// The variable naming a directory that holds MySQL's `mysqld`. Set, the throwaway servers
/// are MySQL servers started from it, and [`BIN_DIR_VAR`] is not read.
pub const MYSQL_BIN_DIR_VAR: &str = "JOBS_MYSQL_BIN";

/// Which server the binaries are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// MariaDB: `mariadbd`, initialised by `mariadb-install-db`.
    MariaDb,
    /// MySQL: `mysqld`, which initialises its own data directory.
    Mysql,
}

/// Where the server binaries are, and whose they are.
#[derive(Debug, Clone)]
pub struct ServerBinaries {
    dir: PathBuf,
    flavor: Flavor,
}

/// The binaries to start servers from: MySQL's in [`MYSQL_BIN_DIR_VAR`] when it is set;
/// otherwise MariaDB's in [`BIN_DIR_VAR`], or in the first of `/usr/sbin`, `/usr/bin`,
/// `/usr/local/bin` and `/usr/local/mysql/bin` that has both.
pub fn find_server_binaries() -> Result<ServerBinaries> {
    if let Ok(dir) = std::env::var(MYSQL_BIN_DIR_VAR)
        && !dir.is_empty()
    {
        let dir = PathBuf::from(dir);
        if !dir.join("mysqld").exists() {
            return Err(server_error(format!(
                "{MYSQL_BIN_DIR_VAR}={} holds no mysqld (scripts/fetch-mysql prints a directory that does)",
                dir.display()
            )));
        }
        return Ok(ServerBinaries { dir, flavor: Flavor::Mysql });
    }
    let candidates: Vec<PathBuf> = match std::env::var(BIN_DIR_VAR) {
        Ok(dir) if !dir.is_empty() => vec![PathBuf::from(dir)],
        _ => ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/mysql/bin"]
            .iter()
            .map(PathBuf::from)
            .collect(),
    };
    for dir in &candidates {
        if dir.join("mariadbd").exists() && installer(dir).is_some() {
            return Ok(ServerBinaries { dir: dir.clone(), flavor: Flavor::MariaDb });
        }
    }
    Err(server_error(format!(
        "no MariaDB server binaries (mariadbd, mariadb-install-db) in {candidates:?}: install them \
         (`apt-get install mariadb-server`, or run scripts/install-test-deps), set {BIN_DIR_VAR} (or \
         {MYSQL_BIN_DIR_VAR} for MySQL), or point MYSQL_URL at a server"
    )))
}

/// `mariadb-install-db`, next to `mariadbd` or in `/usr/bin`.
fn installer(dir: &Path) -> Option<PathBuf> {
    [dir.join("mariadb-install-db"), PathBuf::from("/usr/bin/mariadb-install-db")]
        .into_iter()
        .find(|p| p.exists())
}

pub(super) fn server_error(what: impl Into<String>) -> DriverError {
    DriverError::Server(what.into())
}

impl ServerBinaries {
    /// Whose binaries these are.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The server program.
    pub(super) fn server(&self) -> PathBuf {
        self.dir.join(match self.flavor {
            Flavor::MariaDb => "mariadbd",
            Flavor::Mysql => "mysqld",
        })
    }

    /// The program that initialises an empty data directory, and its arguments (run as
    /// the `mysql` user when `as_mysql`), for a `root` user without a password.
    pub(super) fn initialiser(&self, data_dir: &Path, as_mysql: bool) -> Result<(PathBuf, Vec<String>)> {
        let datadir = format!("--datadir={}", data_dir.display());
        let (program, mut args) = match self.flavor {
            Flavor::MariaDb => {
                let installer =
                    installer(&self.dir).ok_or_else(|| server_error("mariadb-install-db is missing"))?;
                let args =
                    ["--no-defaults", &datadir, "--auth-root-authentication-method=normal", "--skip-test-db"];
                (installer, args.map(String::from).to_vec())
            }
            Flavor::Mysql => (
                self.server(),
                ["--no-defaults", "--initialize-insecure", &datadir].map(String::from).to_vec(),
            ),
        };
        if as_mysql {
            args.push("--user=mysql".into());
        }
        Ok((program, args))
    }

    /// The options only this server takes, before the shared ones and the settings.
    pub(super) fn own_options(&self) -> &'static [&'static str] {
        match self.flavor {
            // Tables keep no .frm files to sync in MySQL.
            Flavor::MariaDb => &["--skip-name-resolve", "--innodb-log-file-size=256M", "--sync-frm=0"],
            // `--initialize-insecure` makes `root@localhost`, which a TCP connection from
            // 127.0.0.1 only matches with names resolved; no X protocol port, which every
            // server would want for itself (33060); no directory for `LOAD DATA` files.
            // (The redo log keeps its default size: its option changed name in 8.0.30.)
            Flavor::Mysql => &["--mysqlx=OFF", "--secure-file-priv="],
        }
    }
}
