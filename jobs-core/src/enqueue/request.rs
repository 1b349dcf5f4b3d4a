//! A typed request to enqueue one job ([`EnqueueRequest`]), and the shorthands every
//! [`Job`] gets ([`JobExt`]).

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;

use jobs_driver::NewJob;

use super::enqueuer::Enqueuer;
use super::insert::{Enqueued, IntoNewJob, first, insert, insert_sync};
use super::overrides::{Overrides, override_setters};
use crate::backend::JobsBackend;
use crate::error::Result;
use crate::job::Job;

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
        first(insert(target, vec![self.to_new_job()?]).await?)
    }

    /// Inserts the job through a synchronous diesel connection of a supported backend
    /// (`PgConnection`, r2d2), in its transaction if it is in one.
    pub fn enqueue_sync<C>(self, conn: &mut C) -> Result<Enqueued>
    where
        C: diesel::connection::LoadConnection,
        C::Backend: JobsBackend,
    {
        first(insert_sync(conn, vec![self.to_new_job()?])?)
    }
}

impl<J: Job> IntoNewJob for EnqueueRequest<J> {
    fn into_new_job(self) -> Result<NewJob> {
        self.to_new_job()
    }
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
