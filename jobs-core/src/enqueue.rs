//! Enqueueing jobs: typed requests, inside the caller's transaction, on any connection.

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::pg::Pg;
use diesel_async::AsyncConnectionCore;
use serde::Serialize;

use crate::db::jobs::{Inserted, NewJob};
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::stored_text;
use crate::unique::{UniqueBy, UniqueOptions};
use crate::wakeups;

/// What enqueueing one job did: the job's id, and whether a job with the same uniqueness
/// key already existed (then nothing was inserted and `id` is that job's).
pub type Enqueued = Inserted;

/// The largest argument (and metadata) payload accepted, in bytes of JSON.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// Refuses a payload (`arguments` or `metadata`, as JSON text) Postgres could not or
/// should not store: over [`MAX_PAYLOAD_BYTES`], or holding a NUL character.
fn check_payload(kind: &str, what: &'static str, json: &str) -> Result<()> {
    if json.len() > MAX_PAYLOAD_BYTES {
        return Err(Error::PayloadTooLarge {
            kind: kind.to_owned(),
            size: json.len(),
            limit: MAX_PAYLOAD_BYTES,
        });
    }
    if stored_text::holds_nul(json) {
        return Err(Error::NulInPayload { kind: kind.to_owned(), what });
    }
    Ok(())
}

/// Where jobs can be inserted from async code: `&mut AsyncPgConnection` (in a transaction
/// or not), a pooled connection, or `&Pool`.
pub trait Enqueuer: Send {
    /// Inserts the jobs in one statement.
    fn insert(self, jobs: &[NewJob]) -> impl Future<Output = Result<Vec<Inserted>>> + Send;
}

impl<C> Enqueuer for &mut C
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        db::jobs::insert_many(self, jobs, None).await
    }
}

/// A pooled connection is not in a transaction: the insert commits by itself and returns.
/// Its wake-up is rationed per queue (`wakeups.rs`): the first insert of a window notifies
/// from its own statement; later ones in the window get one trailing wake-up at its end.
impl Enqueuer for &Pool {
    async fn insert(self, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        let wakeups = wakeups::for_pool(self);
        let due = due_queues(jobs);
        let leading = !due.is_empty() && wakeups.claim_leading(&due);
        let mut conn = self.get().await?;
        let (inserted, queues) = db::jobs::insert_many_committed(&mut conn, jobs, None, leading).await?;
        drop(conn);
        if !leading && !queues.is_empty() {
            wakeups.cover(queues);
        }
        Ok(inserted)
    }
}

/// The queues of the jobs due now by this process's clock (a guess: the database decides,
/// and an insert that did not notify wakes the queues it reports afterwards).
fn due_queues(jobs: &[NewJob]) -> Vec<&str> {
    let now = Utc::now();
    let mut queues: Vec<&str> = Vec::new();
    for job in jobs {
        let due = job.run_at.is_none_or(|at| at <= now) && job.delay_ms.is_none_or(|ms| ms <= 0);
        if due && !queues.contains(&&*job.queue) {
            queues.push(&job.queue);
        }
    }
    queues
}

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
    queue: Option<String>,
    priority: Option<i16>,
    max_attempts: Option<i32>,
    timeout: Option<Option<Duration>>,
    run_at: Option<DateTime<Utc>>,
    delay: Option<Duration>,
    meta: serde_json::Map<String, serde_json::Value>,
    tags: Vec<String>,
    unique_key: Option<String>,
    kind: PhantomData<fn() -> J>,
}

fn validate_tag(tag: &str) -> Result<()> {
    let ok = !tag.is_empty()
        && tag.len() <= 100
        && tag.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidOption {
            option: "tag",
            reason: format!("`{tag}`: tags are 1 to 100 characters of letters, digits and _ - . : /"),
        })
    }
}

/// Checks a queue name: 1 to 128 characters, no control characters.
pub fn validate_queue(queue: &str) -> Result<()> {
    if queue.is_empty() || queue.chars().count() > 128 || queue.chars().any(char::is_control) {
        return Err(Error::InvalidOption {
            option: "queue",
            reason: format!("`{}`: queue names are 1 to 128 printable characters", queue.escape_debug()),
        });
    }
    Ok(())
}

/// Checks a kind name of a row built by hand: 1 to 255 characters (`#[job]` checks its
/// kinds at compile time).
fn validate_kind(kind: &str) -> Result<()> {
    if kind.is_empty() || kind.chars().count() > 255 {
        return Err(Error::InvalidOption {
            option: "kind",
            reason: format!("`{}`: kinds are 1 to 255 characters", kind.escape_debug()),
        });
    }
    Ok(())
}

fn millis(option: &'static str, d: Duration) -> Result<i64> {
    let ms = i64::try_from(d.as_millis())
        .map_err(|_| Error::InvalidOption { option, reason: format!("{d:?} is too long") })?;
    Ok(ms)
}

impl<J: Job> EnqueueRequest<J> {
    /// A request with the kind's defaults.
    pub fn new(args: J::Args) -> Self {
        EnqueueRequest {
            args,
            queue: None,
            priority: None,
            max_attempts: None,
            timeout: None,
            run_at: None,
            delay: None,
            meta: serde_json::Map::new(),
            tags: Vec::new(),
            unique_key: None,
            kind: PhantomData,
        }
    }

    /// Runs on this queue instead of the kind's.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Sets the number of attempts.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// Sets (or with `None` removes) the per-attempt time limit.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs no earlier than `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self.delay = None;
        self
    }

    /// Runs after `delay`, counted on the database's clock from the insert.
    pub fn run_in(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self.run_at = None;
        self
    }

    /// Adds a metadata entry (request id, user id, ...), visible to the job and the
    /// dashboard. Values that fail to serialize are stored as `null`.
    pub fn meta(mut self, key: impl Into<String>, value: impl Serialize) -> Self {
        self.meta.insert(key.into(), serde_json::to_value(value).unwrap_or(serde_json::Value::Null));
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the uniqueness key explicitly. Jobs of kinds without unique options become
    /// unique among pending jobs for this call.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// The row this request inserts, validated and encoded.
    pub fn to_new_job(&self) -> Result<NewJob> {
        let defaults = J::options();
        let kind = J::KIND;
        let queue: Cow<'static, str> = match &self.queue {
            Some(queue) => Cow::Owned(queue.clone()),
            None => defaults.queue,
        };
        validate_queue(&queue)?;
        let max_attempts = self.max_attempts.unwrap_or(defaults.max_attempts);
        if max_attempts < 1 {
            return Err(Error::InvalidOption {
                option: "max_attempts",
                reason: format!("{max_attempts}: a job needs at least one attempt"),
            });
        }
        let timeout = self.timeout.unwrap_or(defaults.timeout);
        let timeout_ms = match timeout {
            Some(t) if t.is_zero() => {
                return Err(Error::InvalidOption {
                    option: "timeout",
                    reason: "a timeout must be positive".into(),
                });
            }
            Some(t) => Some(millis("timeout", t)?),
            None => None,
        };
        let mut tags: Vec<String> = defaults.tags.iter().map(|t| t.to_string()).collect();
        tags.extend(self.tags.iter().cloned());
        tags.sort();
        tags.dedup();
        for tag in &tags {
            validate_tag(tag)?;
        }

        let encode = |e| Error::EncodeArgs { kind: kind.to_owned(), source: e };
        let unique = match (&defaults.unique, &self.unique_key) {
            (None, None) => None,
            (Some(u), explicit) => Some((u.clone(), explicit.as_deref())),
            (None, Some(explicit)) => {
                Some((UniqueOptions::new(UniqueBy::Key("".into())), Some(explicit.as_str())))
            }
        };
        let (args, unique) = match unique {
            None => (serde_json::to_string(&self.args).map_err(encode)?, None),
            Some((options, explicit)) => {
                // Canonical form (sorted keys) so equal arguments hash equally.
                let value = serde_json::to_value(&self.args).map_err(encode)?;
                let key = options.key(kind, &queue, &value, explicit, Utc::now().timestamp());
                if options.states.is_empty() {
                    return Err(Error::InvalidOption {
                        option: "unique.states",
                        reason: "uniqueness needs at least one state".into(),
                    });
                }
                (value.to_string(), Some((key, options.states)))
            }
        };
        check_payload(kind, "arguments", &args)?;
        let meta = if self.meta.is_empty() {
            Cow::Borrowed("{}")
        } else {
            Cow::Owned(serde_json::Value::Object(self.meta.clone()).to_string())
        };
        check_payload(kind, "metadata", &meta)?;
        Ok(NewJob {
            kind: Cow::Borrowed(kind),
            queue,
            args,
            meta,
            tags,
            priority: self.priority.unwrap_or(defaults.priority),
            max_attempts,
            timeout_ms,
            run_at: self.run_at,
            delay_ms: self.delay.map(|d| millis("run_in", d)).transpose()?,
            unique,
        })
    }

    /// Inserts the job through `target` — in the caller's transaction when `target` is a
    /// connection inside one: roll back, and the job never existed.
    pub async fn enqueue<E: Enqueuer>(self, target: E) -> Result<Enqueued> {
        let job = self.to_new_job()?;
        first(insert(target, std::slice::from_ref(&job)).await?)
    }

    /// Inserts the job through a synchronous diesel connection (`PgConnection`, r2d2).
    pub fn enqueue_sync<C>(self, conn: &mut C) -> Result<Enqueued>
    where
        C: diesel::connection::LoadConnection<Backend = Pg>,
    {
        let job = self.to_new_job()?;
        first(db::jobs::insert_many_sync(conn, std::slice::from_ref(&job), None)?)
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

/// A row built by hand gets the checks a typed request gets (the table itself only checks
/// that finished jobs carry their finish time).
impl IntoNewJob for NewJob {
    fn into_new_job(self) -> Result<NewJob> {
        validate_kind(&self.kind)?;
        validate_queue(&self.queue)?;
        if self.max_attempts < 1 {
            return Err(Error::InvalidOption {
                option: "max_attempts",
                reason: format!("{}: a job needs at least one attempt", self.max_attempts),
            });
        }
        if self.timeout_ms.is_some_and(|ms| ms <= 0) {
            return Err(Error::InvalidOption {
                option: "timeout",
                reason: "a timeout must be positive".into(),
            });
        }
        check_payload(&self.kind, "arguments", &self.args)?;
        check_payload(&self.kind, "metadata", &self.meta)?;
        for tag in &self.tags {
            validate_tag(tag)?;
        }
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

/// Inserts `rows` through `target` (or, in a test's inline mode, runs them at once).
async fn insert<E: Enqueuer>(target: E, rows: &[NewJob]) -> Result<Vec<Enqueued>> {
    #[cfg(feature = "testing")]
    if let Some(ran) = crate::testing::inline::intercept(rows).await {
        return ran;
    }
    target.insert(rows).await
}

/// [`enqueue_many`] on a synchronous diesel connection.
pub fn enqueue_many_sync<C, I>(conn: &mut C, jobs: I) -> Result<Vec<Enqueued>>
where
    C: diesel::connection::LoadConnection<Backend = Pg>,
    I: IntoIterator,
    I::Item: IntoNewJob,
{
    let rows = new_jobs(jobs)?;
    db::jobs::insert_many_sync(conn, &rows, None)
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
        C: diesel::connection::LoadConnection<Backend = Pg>,
    {
        EnqueueRequest::<Self>::new(args).enqueue_sync(conn)
    }
}

impl<J: Job> JobExt for J {}
