//! Enqueueing jobs: typed requests, inside the caller's transaction, on any connection of
//! a supported backend, a pool, or a driver.

use jobs_driver::ConnectionDriver;
use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_driver::{Driver, Inserted, JobInsertManyParams, NewJob};
use serde::Serialize;

use crate::backend::JobsBackend;
pub use crate::enqueuer::Enqueuer;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::options::JobOptions;
use crate::unique::{UniqueBy, UniqueOptions};

/// What enqueueing one job did: the job's id, and whether a job with the same uniqueness
/// key already existed (then nothing was inserted and `id` is that job's).
pub type Enqueued = Inserted;

/// A job of kind `J` about to be enqueued, with per-call overrides of the kind's defaults.
///
/// ```no_run
/// # use jobs_core::{EnqueueRequest, Job, JobContext};
/// # use std::time::Duration;
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Welcome { user_id: i64 }
/// # struct SendWelcome;
/// # impl Job for SendWelcome { const KIND: &'static str = "w"; type Args = Welcome; type Output = (); type Error = std::io::Error;
/// #   async fn run(_: JobContext, _: Welcome) -> Result<(), std::io::Error> { Ok(()) } }
/// # async fn demo(conn: &mut diesel_async::AsyncPgConnection) -> jobs_core::Result<()> {
/// let enqueued = EnqueueRequest::<SendWelcome>::new(Welcome { user_id: 7 })
///     .run_in(Duration::from_secs(600))
///     .priority(1)
///     .meta("request_id", "req-42")
///     .tag("signup")
///     .enqueue(conn)
///     .await?;
/// println!("job {} (duplicate: {})", enqueued.id, enqueued.existing);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until it is enqueued"]
pub struct EnqueueRequest<J: Job> {
    args: J::Args,
    overrides: Overrides,
    kind: PhantomData<fn() -> J>,
}

/// What a request says instead of its kind's options: one definition for the typed
/// [`EnqueueRequest`] and the by-name [`KindRequest`](crate::KindRequest).
#[derive(Debug, Clone, Default)]
pub(crate) struct Overrides {
    pub(crate) queue: Option<String>,
    pub(crate) priority: Option<i16>,
    pub(crate) max_attempts: Option<i32>,
    pub(crate) timeout: Option<Option<Duration>>,
    pub(crate) run_at: Option<DateTime<Utc>>,
    pub(crate) delay: Option<Duration>,
    pub(crate) meta: serde_json::Map<String, serde_json::Value>,
    pub(crate) tags: Vec<String>,
    pub(crate) unique_key: Option<String>,
}

/// The per-call setters of a request with an `overrides` field.
macro_rules! override_setters {
    () => {
        /// Runs on this queue instead of the kind's.
        pub fn queue(mut self, queue: impl Into<String>) -> Self {
            self.overrides.queue = Some(queue.into());
            self
        }

        /// Sets the priority (lower runs first).
        pub fn priority(mut self, priority: i16) -> Self {
            self.overrides.priority = Some(priority);
            self
        }

        /// Sets the number of attempts.
        pub fn max_attempts(mut self, max_attempts: i32) -> Self {
            self.overrides.max_attempts = Some(max_attempts);
            self
        }

        /// Sets (or with `None` removes) the per-attempt time limit.
        pub fn timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
            self.overrides.timeout = Some(timeout);
            self
        }

        /// Runs no earlier than `at`.
        pub fn run_at(mut self, at: chrono::DateTime<chrono::Utc>) -> Self {
            self.overrides.run_at = Some(at);
            self.overrides.delay = None;
            self
        }

        /// Runs after `delay`, counted on the database's clock from the insert.
        pub fn run_in(mut self, delay: std::time::Duration) -> Self {
            self.overrides.delay = Some(delay);
            self.overrides.run_at = None;
            self
        }

        /// Adds a metadata entry (request id, user id, ...), visible to the job and the
        /// dashboard. Values that fail to serialize are stored as `null`.
        pub fn meta(mut self, key: impl Into<String>, value: impl serde::Serialize) -> Self {
            self.overrides
                .meta
                .insert(key.into(), serde_json::to_value(value).unwrap_or(serde_json::Value::Null));
            self
        }

        /// Adds a tag (to the kind's own).
        pub fn tag(mut self, tag: impl Into<String>) -> Self {
            self.overrides.tags.push(tag.into());
            self
        }

        /// Sets the uniqueness key explicitly. Jobs of kinds without unique options become
        /// unique among pending jobs for this call.
        pub fn unique_key(mut self, key: impl Into<String>) -> Self {
            self.overrides.unique_key = Some(key.into());
            self
        }
    };
}
pub(crate) use override_setters;

impl Overrides {
    /// The row of a job of `kind` with `args`, these overrides, and `defaults` (the
    /// kind's options) for the rest, encoded and checked by the rules every row obeys
    /// ([`NewJob::validate`]).
    pub(crate) fn new_job<A: Serialize>(
        &self,
        kind: Cow<'static, str>,
        defaults: JobOptions,
        args: &A,
    ) -> Result<NewJob> {
        let queue: Cow<'static, str> = match &self.queue {
            Some(queue) => Cow::Owned(queue.clone()),
            None => defaults.queue,
        };
        let timeout_ms = match self.timeout.unwrap_or(defaults.timeout) {
            Some(t) => Some(millis("timeout", t)?),
            None => None,
        };
        let mut tags: Vec<String> = defaults.tags.iter().map(|t| t.to_string()).collect();
        tags.extend(self.tags.iter().cloned());
        tags.sort();
        tags.dedup();

        let encode = |e| Error::EncodeArgs { kind: kind.to_string(), source: e };
        let unique = match (&defaults.unique, &self.unique_key) {
            (None, None) => None,
            (Some(u), explicit) => Some((u.clone(), explicit.as_deref())),
            (None, Some(explicit)) => {
                Some((UniqueOptions::new(UniqueBy::Key("".into())), Some(explicit.as_str())))
            }
        };
        let (args, unique) = match unique {
            None => (serde_json::to_string(args).map_err(encode)?, None),
            Some((options, explicit)) => {
                // Canonical form (sorted keys) so equal arguments hash equally.
                let value = serde_json::to_value(args).map_err(encode)?;
                let key = options.key(&kind, &queue, &value, explicit, Utc::now().timestamp());
                (value.to_string(), Some((key, options.states)))
            }
        };
        let meta = if self.meta.is_empty() {
            Cow::Borrowed("{}")
        } else {
            Cow::Owned(serde_json::Value::Object(self.meta.clone()).to_string())
        };
        let job = NewJob {
            kind,
            queue,
            args,
            meta,
            tags,
            priority: self.priority.unwrap_or(defaults.priority),
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            timeout_ms,
            run_at: self.run_at,
            delay_ms: self.delay.map(|d| millis("run_in", d)).transpose()?,
            unique,
        };
        job.validate()?;
        Ok(job)
    }
}

/// Checks a queue name: 1 to 128 characters, no control characters (the rule of
/// [`jobs_driver::validation::validate_queue`]).
pub fn validate_queue(queue: &str) -> Result<()> {
    Ok(jobs_driver::validation::validate_queue(queue)?)
}

fn millis(option: &'static str, d: Duration) -> Result<i64> {
    let ms = i64::try_from(d.as_millis())
        .map_err(|_| Error::InvalidOption { option, reason: format!("{d:?} is too long") })?;
    Ok(ms)
}

impl<J: Job> EnqueueRequest<J> {
    /// A request with the kind's defaults.
    pub fn new(args: J::Args) -> Self {
        EnqueueRequest { args, overrides: Overrides::default(), kind: PhantomData }
    }

    override_setters!();

    /// The row this request inserts, encoded and checked by the rules every row obeys
    /// ([`NewJob::validate`]).
    pub fn to_new_job(&self) -> Result<NewJob> {
        self.overrides.new_job(Cow::Borrowed(J::KIND), J::options(), &self.args)
    }

    /// Inserts the job through `target` — in the caller's transaction when `target` is a
    /// connection inside one: roll back, and the job never existed.
    pub async fn enqueue<E: Enqueuer>(self, target: E) -> Result<Enqueued> {
        let job = self.to_new_job()?;
        first(insert(target, std::slice::from_ref(&job)).await?)
    }

    /// Inserts the job through a synchronous diesel connection of a supported backend
    /// (`PgConnection`, r2d2), in its transaction if it is in one.
    pub fn enqueue_sync<C>(self, conn: &mut C) -> Result<Enqueued>
    where
        C: diesel::connection::LoadConnection,
        C::Backend: JobsBackend,
    {
        let job = self.to_new_job()?;
        first(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::insert_sync(
            conn,
            std::slice::from_ref(&job),
        )?)
    }
}

fn first(mut inserted: Vec<Inserted>) -> Result<Enqueued> {
    inserted.pop().ok_or(Error::Database(diesel::result::Error::NotFound))
}

/// Anything that turns into a row to insert: an [`EnqueueRequest`] or a [`NewJob`].
pub trait IntoNewJob {
    /// The row.
    fn into_new_job(self) -> Result<NewJob>;
}

impl<J: Job> IntoNewJob for EnqueueRequest<J> {
    fn into_new_job(self) -> Result<NewJob> {
        self.to_new_job()
    }
}

/// A row built by hand gets the checks a typed request gets ([`NewJob::validate`]; the
/// table itself only checks that finished jobs carry their finish time).
impl IntoNewJob for NewJob {
    fn into_new_job(self) -> Result<NewJob> {
        self.validate()?;
        Ok(self)
    }
}

/// Inserts many jobs, of one kind or several, in one statement. Results come back in the
/// order of the input.
pub async fn enqueue_many<E, I>(target: E, jobs: I) -> Result<Vec<Enqueued>>
where
    E: Enqueuer,
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    let rows = new_jobs(jobs)?;
    insert(target, &rows).await
}

/// The rows of `jobs`, validated; stops at the first invalid one. (Collecting into a
/// `Result` would start from an empty vector and grow it, moving the rows each time.)
fn new_jobs<I>(jobs: I) -> Result<Vec<NewJob>>
where
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    let jobs = jobs.into_iter();
    let mut rows = Vec::with_capacity(jobs.size_hint().0);
    for job in jobs {
        rows.push(job.into_new_job()?);
    }
    Ok(rows)
}

tokio::task_local! {
    /// The driver every async enqueue of the task inserts through instead of its target,
    /// when set ([`enqueue_through`]).
    static ENQUEUE_DRIVER: Arc<dyn Driver>;
}

/// Runs `body` with every async enqueue inside it (`J::enqueue`, `build(..).enqueue`,
/// [`enqueue_many`]) inserting through `driver`, whatever target it names. The seam inline
/// mode plugs into: its driver runs the jobs instead of storing them
/// (`testing::inline`).
#[cfg(feature = "testing")]
pub(crate) async fn enqueue_through<F: Future>(driver: Arc<dyn Driver>, body: F) -> F::Output {
    ENQUEUE_DRIVER.scope(driver, body).await
}

/// Inserts `rows` through `target`, or through the task's [`enqueue_through`] driver.
async fn insert<E: Enqueuer>(target: E, rows: &[NewJob]) -> Result<Vec<Enqueued>> {
    if let Ok(driver) = ENQUEUE_DRIVER.try_with(Arc::clone) {
        return Ok(driver.job_insert_many(JobInsertManyParams { jobs: rows, now: None }).await?);
    }
    target.insert(rows).await
}

/// [`enqueue_many`] on a synchronous diesel connection of a supported backend.
pub fn enqueue_many_sync<C, I>(conn: &mut C, jobs: I) -> Result<Vec<Enqueued>>
where
    C: diesel::connection::LoadConnection,
    C::Backend: JobsBackend,
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    let rows = new_jobs(jobs)?;
    Ok(<<C::Backend as JobsBackend>::Driver as ConnectionDriver>::insert_sync(conn, &rows)?)
}

/// Shorthands on every [`Job`]: `SendWelcome::enqueue(conn, args)`.
pub trait JobExt: Job + Sized {
    /// A request to customise before enqueueing.
    fn build(args: Self::Args) -> EnqueueRequest<Self> {
        EnqueueRequest::new(args)
    }

    /// Enqueues with the kind's defaults.
    fn enqueue<E: Enqueuer>(target: E, args: Self::Args) -> impl Future<Output = Result<Enqueued>> + Send {
        EnqueueRequest::<Self>::new(args).enqueue(target)
    }

    /// Enqueues with the kind's defaults on a synchronous connection.
    fn enqueue_sync<C>(conn: &mut C, args: Self::Args) -> Result<Enqueued>
    where
        C: diesel::connection::LoadConnection,
        C::Backend: JobsBackend,
    {
        EnqueueRequest::<Self>::new(args).enqueue_sync(conn)
    }
}

impl<J: Job> JobExt for J {}
