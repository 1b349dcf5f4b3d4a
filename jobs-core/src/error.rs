//! The crate's error type.

use std::time::Duration;

use jobs_driver::DriverError;
use jobs_driver::validation::InvalidJob;

/// Everything that can go wrong in `jobs-core`.
///
/// Database errors keep diesel's error as their source; the other variants say what was
/// wrong with the input or the configuration, naming the offending item.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
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

    /// Job arguments could not be encoded to JSON at the enqueue site.
    #[error("the arguments of job kind `{kind}` could not be encoded as JSON: {source}")]
    EncodeArgs {
        /// The job kind.
        kind: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },

    /// An argument (or metadata) payload is larger than the limit.
    #[error("the {what} of job kind `{kind}` are {size} bytes, over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The job kind.
        kind: String,
        /// `arguments` or `metadata`.
        what: &'static str,
        /// The size of the encoded arguments.
        size: usize,
        /// The limit in force.
        limit: usize,
    },

    /// An argument (or metadata) payload holds a NUL character, which Postgres cannot
    /// store in `jsonb`.
    #[error("the {what} of job kind `{kind}` contain a NUL character (\\u0000), which Postgres cannot store")]
    NulInPayload {
        /// The job kind.
        kind: String,
        /// `arguments` or `metadata`.
        what: &'static str,
    },

    /// Two job definitions share one kind name.
    #[error(
        "two jobs are registered with the kind `{kind}`: `{first}` and `{second}`; \
         give one of them another name with `#[job(kind = \"...\")]`"
    )]
    DuplicateKind {
        /// The kind both claim.
        kind: String,
        /// The first definition's Rust type.
        first: String,
        /// The second definition's Rust type.
        second: String,
    },

    /// A worker would serve a queue that no registered job names as its queue: every job it
    /// claimed there would be of a kind it does not know. Usually the binary does not link
    /// the crate that defines the jobs.
    #[error(
        "the worker serves queue `{queue}`, but no registered job runs on it ({registered}); \
         link the crate that defines its jobs into this binary (the `#[job]` functions register \
         themselves only when linked), or call `.allow_queues_without_jobs()` if its jobs reach \
         it by a per-call `.queue(\"{queue}\")`"
    )]
    NoJobsForQueue {
        /// The queue.
        queue: String,
        /// What is registered, per queue (or "no job at all").
        registered: String,
    },

    /// A job needs a value of the application's (a `Data<T>` parameter) that the worker
    /// was not given.
    #[error("{}", missing_data_message(kind, type_name, given))]
    MissingData {
        /// The job's kind.
        kind: String,
        /// The type it needs.
        type_name: &'static str,
        /// The types the worker was given.
        given: Vec<&'static str>,
    },

    /// A worker was started with a node name that a live process already uses. Two
    /// processes with one name would take each other's running jobs for orphans.
    #[error(
        "the node name `{node}` is in use by a live process ({holder}); give this worker another \
         name (`.node_name(...)`), or leave the name to the default, which is unique per process start"
    )]
    NodeNameTaken {
        /// The name.
        node: String,
        /// Who holds it, as its node row says (host, process id, last heartbeat).
        holder: String,
    },

    /// A retry was refused: another job holds the job's uniqueness key (a newer copy waits
    /// or runs), and the retried job would break the key's uniqueness.
    #[error(
        "job {id} was not retried: another job holds its uniqueness key (retry it once that job has finished)"
    )]
    UniqueKeyHeld {
        /// The job.
        id: i64,
    },

    /// A job kind is not registered in this binary.
    #[error("no job is registered with the kind `{0}`")]
    UnknownKind(String),

    /// An option was given a value outside its range.
    #[error("invalid option `{option}`: {reason}")]
    InvalidOption {
        /// Which option.
        option: &'static str,
        /// Why the value is rejected.
        reason: String,
    },

    /// A cron expression or time zone did not parse.
    #[error("cron schedule `{schedule}`: {reason}")]
    InvalidSchedule {
        /// The schedule's name.
        schedule: String,
        /// What is wrong with it.
        reason: String,
    },

    /// No job with this id exists.
    #[error("job {0} not found")]
    JobNotFound(i64),

    /// An operation did not finish in time.
    #[error("timed out after {0:?}")]
    Timeout(Duration),

    /// The runtime is the wrong kind for the operation.
    #[error("{0}")]
    Runtime(String),

    /// Starting or using a throwaway database server failed (testing support, the demo).
    #[error("throwaway database server: {0}")]
    Cluster(String),

    /// The database cannot run workers: a read-only replica, or a server older than the
    /// oldest supported version (checked when a worker starts).
    #[error("this database cannot run workers: {0}")]
    UnfitServer(String),

    /// The driver cannot perform this operation (see its capabilities).
    #[error("the {driver} driver cannot {operation}")]
    Unsupported {
        /// The driver's name.
        driver: &'static str,
        /// What was asked of it.
        operation: &'static str,
    },

    /// A workflow that cannot be inserted (nothing was written): see
    /// [`WorkflowError`](jobs_driver::WorkflowError).
    #[error("{0}")]
    Workflow(#[from] jobs_driver::WorkflowError),

    /// A dependency's result a job asked for is not there, or does not decode as asked.
    #[error("dependency result of `{kind}`: {reason}")]
    DependencyResult {
        /// The dependency's kind.
        kind: String,
        /// What is wrong.
        reason: String,
    },

    /// An I/O error from the operating system.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),

    /// An insert middleware refused a job (see [`middleware`](crate::middleware)): nothing
    /// of the insert was written, and the caller's transaction is as it was.
    #[error("insert middleware `{middleware}` refused a job of kind `{kind}`: {source}")]
    InsertRefused {
        /// The middleware's name ([`InsertMiddleware::name`](crate::middleware::InsertMiddleware::name)).
        middleware: String,
        /// The refused job's kind.
        kind: String,
        /// What the middleware said.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// Whether the error came from the database connection going away (as opposed to a
    /// query the database rejected), so that retrying later may succeed.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Connection(_) | Error::Pool(_) => true,
            Error::Database(e) => jobs_driver::is_transient(e),
            _ => false,
        }
    }

    /// Whether the operation never reached the database (no connection could be had), so
    /// that none of its writes applied.
    pub(crate) fn sent_nothing(&self) -> bool {
        matches!(self, Error::Connection(_) | Error::Pool(_))
    }
}

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Error {
        match e {
            DriverError::Database(e) => Error::Database(e),
            DriverError::Connection(e) => Error::Connection(e),
            DriverError::Pool(e) => Error::Pool(e),
            DriverError::Migration(e) => Error::Migration(e),
            DriverError::Unsupported { driver, operation } => Error::Unsupported { driver, operation },
            DriverError::Runtime(e) => Error::Runtime(e),
            DriverError::Server(e) => Error::Cluster(e),
            DriverError::Io(e) => Error::Io(e),
            DriverError::Workflow(e) => Error::Workflow(e),
            other => Error::Runtime(other.to_string()),
        }
    }
}

impl From<InvalidJob> for Error {
    fn from(e: InvalidJob) -> Error {
        match e {
            InvalidJob::Option { option, reason } => Error::InvalidOption { option, reason },
            InvalidJob::PayloadTooLarge { kind, what, size, limit } => {
                Error::PayloadTooLarge { kind, what, size, limit }
            }
            InvalidJob::NulInPayload { kind, what } => Error::NulInPayload { kind, what },
            other => Error::InvalidOption { option: "job", reason: other.to_string() },
        }
    }
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for Error {
    fn from(e: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        Error::Pool(e.to_string())
    }
}

/// Any error, boxed: what a middleware returns.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What [`Error::MissingData`] and a run that lacks the value say.
pub(crate) fn missing_data_message(kind: &str, type_name: &str, given: &[&str]) -> String {
    let given = if given.is_empty() { "none".to_owned() } else { given.join(", ") };
    format!(
        "job `{kind}` needs a `{type_name}` from the application, but the worker has none: add \
         `.data(value)` with the value itself (not wrapped in an `Arc` or `Data`: use `.data_arc(arc)` \
         for an `Arc`) to the worker builder (its values: {given})"
    )
}
