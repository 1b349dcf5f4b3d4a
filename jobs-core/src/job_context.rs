//! What a running job knows about itself.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use jobs_driver::Driver;

use crate::data::{AppData, Data};
use crate::error::{Error, Result};

/// Handed to every job: its identity, its metadata, a cancellation signal, and the
/// worker's database for the job's own work ([`pool_as`](Self::pool_as); on Postgres
/// `ctx.pool()` and `ctx.conn()` with `use jobs_core::postgres::PgContext;`).
///
/// Cloning is cheap (one `Arc`).
#[derive(Debug, Clone)]
pub struct JobContext {
    inner: Arc<Inner>,
}

struct Inner {
    id: i64,
    kind: &'static str,
    queue: Arc<str>,
    attempt: i32,
    max_attempts: i32,
    priority: i16,
    meta: Box<RawValue>,
    tags: Vec<String>,
    node: Arc<str>,
    created_at: DateTime<Utc>,
    cancel: CancellationToken,
    driver: Option<Arc<dyn Driver>>,
    data: AppData,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("queue", &self.queue)
            .field("attempt", &self.attempt)
            .field("max_attempts", &self.max_attempts)
            .field("node", &self.node)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// The parts of a claimed job a context is built from.
pub struct ContextParts {
    /// Job id.
    pub id: i64,
    /// Registered kind.
    pub kind: &'static str,
    /// Queue name.
    pub queue: Arc<str>,
    /// This attempt's number (1-based).
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Priority.
    pub priority: i16,
    /// Metadata JSON.
    pub meta: Box<RawValue>,
    /// Tags.
    pub tags: Vec<String>,
    /// The node running the job.
    pub node: Arc<str>,
    /// When the job was inserted.
    pub created_at: DateTime<Utc>,
    /// Cancelled when the job is cancelled, times out, or the worker shuts down.
    pub cancel: CancellationToken,
    /// The worker's driver, whose pool the job may use.
    pub driver: Option<Arc<dyn Driver>>,
    /// The application's values ([`WorkerBuilder::data`](crate::WorkerBuilder::data)).
    pub data: AppData,
}

impl JobContext {
    /// Builds a context. The worker does this for every job; the testing helpers do it to
    /// run a job inline.
    pub fn new(parts: ContextParts) -> JobContext {
        JobContext {
            inner: Arc::new(Inner {
                id: parts.id,
                kind: parts.kind,
                queue: parts.queue,
                attempt: parts.attempt,
                max_attempts: parts.max_attempts,
                priority: parts.priority,
                meta: parts.meta,
                tags: parts.tags,
                node: parts.node,
                created_at: parts.created_at,
                cancel: parts.cancel,
                driver: parts.driver,
                data: parts.data,
            }),
        }
    }

    /// The job's id.
    pub fn id(&self) -> i64 {
        self.inner.id
    }

    /// The job's kind.
    pub fn kind(&self) -> &'static str {
        self.inner.kind
    }

    /// The queue it runs on.
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }

    /// This attempt's number, starting at 1.
    pub fn attempt(&self) -> i32 {
        self.inner.attempt
    }

    /// Attempts allowed in all.
    pub fn max_attempts(&self) -> i32 {
        self.inner.max_attempts
    }

    /// Whether a failure now discards the job instead of retrying it.
    pub fn is_last_attempt(&self) -> bool {
        self.inner.attempt >= self.inner.max_attempts
    }

    /// The job's priority.
    pub fn priority(&self) -> i16 {
        self.inner.priority
    }

    /// The job's tags.
    pub fn tags(&self) -> &[String] {
        &self.inner.tags
    }

    /// The name of the node running the job.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// When the job was enqueued.
    pub fn created_at(&self) -> DateTime<Utc> {
        self.inner.created_at
    }

    /// The metadata object as JSON text.
    pub fn meta_json(&self) -> &str {
        self.inner.meta.get()
    }

    /// The metadata decoded into `T`.
    pub fn meta<T: DeserializeOwned>(&self) -> std::result::Result<T, serde_json::Error> {
        serde_json::from_str(self.inner.meta.get())
    }

    /// One metadata entry (`ctx.meta_value("request_id")`).
    pub fn meta_value(&self, key: &str) -> Option<serde_json::Value> {
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(self.inner.meta.get()).ok()?;
        map.get(key).cloned()
    }

    /// The cancellation signal: fired when the job is cancelled (from code or the
    /// dashboard, on any node), when it times out, and when the worker shuts down past its
    /// deadline. The handler's future is dropped shortly after; long synchronous sections
    /// should check [`is_cancelled`](Self::is_cancelled).
    pub fn cancellation_token(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Completes when the job is cancelled.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// Whether the job has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// The application's value of type `T`, registered with
    /// [`WorkerBuilder::data`](crate::WorkerBuilder::data) (a `Data<T>` parameter of a
    /// `#[job]` function reads it for you, checked when the worker is built).
    pub fn data<T: Send + Sync + 'static>(&self) -> Result<Data<T>> {
        self.inner.data.get::<T>().ok_or_else(|| Error::MissingData {
            kind: self.inner.kind.to_owned(),
            type_name: std::any::type_name::<T>(),
            given: self.inner.data.type_names(),
        })
    }

    /// Every value of the application's this context holds.
    pub fn app_data(&self) -> &AppData {
        &self.inner.data
    }

    /// The worker's driver (`None` for a context built without one).
    pub fn driver(&self) -> Option<&Arc<dyn Driver>> {
        self.inner.driver.as_ref()
    }

    /// The worker's connection pool, as the backend's pool type `P` (for Postgres,
    /// `jobs_core::postgres::Pool`, also `ctx.pool()` with `jobs_core::postgres::PgContext`),
    /// for the job's own queries. Fails when the context has no driver
    /// or its pool is of another type.
    pub fn pool_as<P: 'static>(&self) -> Result<&P> {
        let driver =
            self.inner.driver.as_ref().ok_or_else(|| Error::Pool("this job context has no pool".into()))?;
        driver.pool().downcast_ref::<P>().ok_or_else(|| {
            Error::Pool(format!(
                "the {} driver's pool is not a `{}`",
                driver.name(),
                std::any::type_name::<P>()
            ))
        })
    }
}

/// Lends the driver to the driver crates' extension traits (`jobs_core::postgres::PgContext`:
/// `ctx.pool()`, `ctx.conn()`).
impl jobs_driver::HasDriver for JobContext {
    fn driver_ref(&self) -> Option<&dyn Driver> {
        self.inner.driver.as_deref()
    }
}
