//! The `jobs-dashboard` binary, run as a real process.

use std::process::{Command, Output};

const BINARY: &str = env!("CARGO_BIN_EXE_jobs-dashboard");

/// Runs the CLI with `args` on `url`; returns success, stdout, stderr.
pub(crate) fn cli(url: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(BINARY);
    command.env_remove("DATABASE_URL");
    if let Some(url) = url {
        command.args(["--database-url", url]);
    }
    let Output { status, stdout, stderr } = command.args(args).output().expect("run jobs-dashboard");
    (
        status.success(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}
