//! Insert middleware: the process's chain, and its application to the jobs of an insert.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use jobs_driver::{Inserted, NewJob};

use crate::error::{BoxError, Error, Result};

/// Code around every enqueue of the process (see the [module docs](super)).
pub trait InsertMiddleware: Send + Sync + 'static {
    /// Sees, and may change, `job` before it is written (its metadata with
    /// [`NewJob::set_meta`], its tags, its priority, ...). An error refuses the whole insert:
    /// nothing of it is written.
    fn before_insert(&self, job: &mut NewJob) -> Result<(), BoxError>;

    /// Sees what inserting `job` did, once the insert's statement returned: its id, or the
    /// id of the job that already held its uniqueness key. In the caller's transaction,
    /// this is before it commits. Does nothing unless overridden.
    fn after_insert(&self, job: &NewJob, inserted: &Inserted) {
        let _ = (job, inserted);
    }

    /// The name errors give (the type's name unless overridden).
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }
}

type Chain = Arc<[Arc<dyn InsertMiddleware>]>;

/// The process's insert middleware, in registration order.
static CHAIN: RwLock<Option<Chain>> = RwLock::new(None);
/// Whether any is registered: an enqueue reads this and nothing else when none is.
static ANY: AtomicBool = AtomicBool::new(false);

/// Adds `middleware` to every enqueue of the process from now on, after those added
/// before (its `before_insert` runs after theirs, its `after_insert` before theirs).
pub fn add_insert_middleware(middleware: impl InsertMiddleware) {
    let mut chain = CHAIN.write().unwrap_or_else(PoisonError::into_inner);
    let mut all: Vec<Arc<dyn InsertMiddleware>> = chain.as_deref().map(<[_]>::to_vec).unwrap_or_default();
    all.push(Arc::new(middleware));
    *chain = Some(all.into());
    ANY.store(true, Ordering::Release);
}

/// The chain an insert runs: the process's middleware when it starts (and, with the
/// `opentelemetry` feature, the insert's `jobs.enqueue` span, which ends with it).
pub(crate) struct InsertChain {
    chain: Option<Chain>,
    #[cfg(feature = "opentelemetry")]
    span: Option<tracing::Span>,
}

impl InsertChain {
    /// The process's chain now (none: nothing to run).
    pub(crate) fn current() -> InsertChain {
        let chain = match ANY.load(Ordering::Acquire) {
            true => CHAIN.read().unwrap_or_else(PoisonError::into_inner).clone(),
            false => None,
        };
        InsertChain {
            chain,
            #[cfg(feature = "opentelemetry")]
            span: None,
        }
    }

    /// Runs every `before_insert` on each of `jobs`, then checks the jobs again (a
    /// middleware may have made one invalid). Stops at the first refusal. With the
    /// `opentelemetry` feature, first opens the insert's span and stores its trace
    /// context in each job.
    pub(crate) fn before<'j>(&mut self, jobs: impl IntoIterator<Item = &'j mut NewJob>) -> Result<()> {
        #[allow(unused_mut)]
        let mut changed = false;
        #[cfg(feature = "opentelemetry")]
        let jobs = {
            let mut jobs: Vec<&mut NewJob> = jobs.into_iter().collect();
            if !jobs.is_empty() {
                let span = crate::telemetry::enqueue_span(&jobs);
                if let Some(headers) = crate::telemetry::headers(&span) {
                    for job in &mut jobs {
                        crate::telemetry::inject(&headers, job);
                    }
                    changed = true;
                }
                self.span = Some(span);
            }
            jobs
        };
        let chain = self.chain.as_deref().unwrap_or_default();
        if chain.is_empty() && !changed {
            return Ok(());
        }
        for job in jobs {
            for middleware in chain {
                middleware.before_insert(job).map_err(|source| Error::InsertRefused {
                    middleware: middleware.name().to_owned(),
                    kind: job.kind.to_string(),
                    source,
                })?;
            }
            job.validate()?;
        }
        Ok(())
    }

    /// Runs `insert` (the insert's statements) inside the insert's span, which it marks
    /// failed when the insert fails (with the `opentelemetry` feature; otherwise as it is).
    pub(crate) async fn around<T, E>(&self, insert: impl Future<Output = Result<T, E>>) -> Result<T, E> {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = &self.span {
            let result = tracing::Instrument::instrument(insert, span.clone()).await;
            if result.is_err() {
                crate::telemetry::failed(span);
            }
            return result;
        }
        insert.await
    }

    /// [`around`](Self::around) for a synchronous insert.
    pub(crate) fn around_sync<T, E>(&self, insert: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        #[cfg(feature = "opentelemetry")]
        if let Some(span) = &self.span {
            let result = span.in_scope(insert);
            if result.is_err() {
                crate::telemetry::failed(span);
            }
            return result;
        }
        insert()
    }

    /// Runs every `after_insert`, in the reverse order, on each job with what its insert did.
    pub(crate) fn after<'j>(&self, done: impl IntoIterator<Item = (&'j NewJob, &'j Inserted)>) {
        let Some(chain) = &self.chain else { return };
        for (job, inserted) in done {
            for middleware in chain.iter().rev() {
                middleware.after_insert(job, inserted);
            }
        }
    }
}
