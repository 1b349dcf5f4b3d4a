//! The error every driver operation returns, and the workflow's own ([`WorkflowError`]).

mod workflow;

pub use workflow::WorkflowError;

/// What went wrong in a driver operation.
///
/// Database errors keep diesel's error as their source. [`DriverError::Unsupported`] names
/// an operation a driver cannot perform; the engine checks a driver's
/// [`Capabilities`](crate::Capabilities) first, so it only reaches callers who ask a
/// driver for something it declared it lacks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// A query failed.
    #[error("database error: {0}")]
    Database(#[from] diesel::result::Error),

    /// A connection could not be opened.
    #[error("could not connect to the database: {0}")]
    Connection(#[from] diesel::ConnectionError),

    /// The pool could not hand out a connection (the database is unreachable, or the pool
    /// is exhausted past its wait timeout).
    #[error("could not get a connection from the pool: {0}")]
    Pool(String),

    /// Running or reverting migrations failed.
    #[error("migration failed: {0}")]
    Migration(String),

    /// The driver cannot perform this operation.
    #[error("the {driver} driver cannot {operation}")]
    Unsupported {
        /// The driver's name.
        driver: &'static str,
        /// What was asked of it.
        operation: &'static str,
    },

    /// The runtime is the wrong kind for the operation.
    #[error("{0}")]
    Runtime(String),

    /// Starting or using a throwaway database server failed (test support, the demo).
    #[error("throwaway database server: {0}")]
    Server(String),

    /// A workflow that cannot be inserted (nothing was written).
    #[error("{0}")]
    Workflow(#[from] WorkflowError),

    /// An I/O error from the operating system.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl DriverError {
    /// Whether the error came from the connection going away or a database busy past its
    /// wait (as opposed to a statement the database rejected), so that retrying later may
    /// succeed (see [`is_transient`]).
    pub fn is_connection_error(&self) -> bool {
        match self {
            DriverError::Connection(_) | DriverError::Pool(_) => true,
            DriverError::Database(e) => is_transient(e),
            _ => false,
        }
    }

    /// A result row count or shape the statement cannot have produced.
    pub fn unexpected(what: impl Into<String>) -> DriverError {
        DriverError::Database(diesel::result::Error::DeserializationError(what.into().into()))
    }
}

/// Whether a diesel error is one that retrying later may cure, as opposed to a statement
/// the database rejected: the connection went away (closed, terminated by the server,
/// lost mid-statement, its socket broken), or the database was busy past the wait it
/// allows (SQLite's "database is locked" when another process held the write lock
/// through the busy timeout; MySQL's lock wait timeout), or it chose this transaction as
/// a deadlock's victim (MySQL rolls it back whole: running it again is the cure).
///
/// ```
/// use diesel::result::{DatabaseErrorKind, Error};
///
/// let broken = Error::DatabaseError(DatabaseErrorKind::Unknown, Box::new(
///     "Input/output error: Input/output error: Broken pipe (os error 32)".to_owned()));
/// assert!(jobs_driver::is_transient(&broken));
/// let rejected = Error::DatabaseError(DatabaseErrorKind::Unknown, Box::new(
///     "Unknown column 'x' in 'field list'".to_owned()));
/// assert!(!jobs_driver::is_transient(&rejected));
/// ```
pub fn is_transient(e: &diesel::result::Error) -> bool {
    use diesel::result::Error as D;
    match e {
        D::DatabaseError(kind, info) => {
            let message = info.message().to_ascii_lowercase();
            matches!(kind, diesel::result::DatabaseErrorKind::ClosedConnection)
                || [
                    "connection",
                    "terminating",
                    "gone away",
                    "database is locked",
                    "database table is locked",
                    "broken pipe",
                    "input/output error",
                    "shutdown in progress",
                    "lock wait timeout",
                    "deadlock found",
                    // Postgres's deadlock victim (its transaction is aborted).
                    "deadlock detected",
                    // MariaDB 11.6+'s snapshot isolation (REPEATABLE READ) on a row
                    // changed since the transaction's snapshot: its transaction is rolled back.
                    "record has changed since last read",
                    "unexpected eof",
                ]
                .iter()
                .any(|sign| message.contains(sign))
        }
        D::BrokenTransactionManager => true,
        _ => false,
    }
}

/// `Result` with [`DriverError`].
pub type Result<T, E = DriverError> = std::result::Result<T, E>;
