//! The command line's error.

/// What can go wrong on the command line. Each message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The database or the jobs library refused.
    #[error(transparent)]
    Jobs(#[from] jobs_core::Error),
    /// An argument's value is wrong.
    #[error("{0}")]
    Invalid(String),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
}
