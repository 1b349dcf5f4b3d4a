//! Batches: a group of jobs, added at once or over time, and a callback job that runs
//! once, when the batch is sealed and every member has finished (completed, discarded or
//! cancelled), and reads how many ended each way (`docs/guide.md`, "Batches").
//!
//! ```no_run
//! use jobs_core::{Batch, BatchCounts, Job, JobContext, JobExt};
//! # use serde::{Deserialize, Serialize};
//! # struct SendEmail;
//! # impl Job for SendEmail { const KIND: &'static str = "email"; type Args = u32; type Output = ();
//! #   type Error = std::io::Error; async fn run(_: JobContext, _: u32) -> Result<(), std::io::Error> { Ok(()) } }
//! # struct Summary;
//! # impl Job for Summary { const KIND: &'static str = "summary"; type Args = String; type Output = ();
//! #   type Error = jobs_core::Error;
//! #   async fn run(ctx: JobContext, _: String) -> Result<(), jobs_core::Error> {
//! #     let BatchCounts { completed, discarded, cancelled } = ctx.batch_counts().await?; Ok(()) } }
//! # async fn demo(tx: &mut diesel_async::AsyncPgConnection) -> jobs_core::Result<()> {
//! // A newsletter: the summary runs once every email has been sent or given up on.
//! let mut batch = Batch::new("newsletter 7", Summary::build("newsletter 7".into()));
//! for user in 0..100 {
//!     batch.add(SendEmail::build(user));
//! }
//! let batch = batch.enqueue(&mut *tx).await?;
//! // Later, in other transactions: more members, then the seal.
//! batch.id.add(&mut *tx, (100..200).map(SendEmail::build)).await?;
//! batch.id.seal(&mut *tx).await?;
//! # Ok(()) }
//! ```

use jobs_driver::{BatchChange, BatchChanged, BatchTarget, Inserted, JobState, NewJob};

use crate::enqueue::{EnqueueRequest, Enqueued, Enqueuer};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::job_context::JobContext;
use crate::middleware::InsertChain;

/// A batch being opened: its callback and its first members. Enqueued, it stays open
/// until sealed ([`sealed`](Self::sealed) now, or [`BatchId::seal`] later): members may
/// join until then, and the callback waits for the seal.
#[derive(Debug)]
#[must_use = "a batch does nothing until it is enqueued"]
pub struct Batch {
    name: String,
    callback: Result<NewJob>,
    members: Vec<NewJob>,
    seal: bool,
    /// The first member that could not be encoded: `enqueue` reports it.
    invalid: Option<Error>,
}

impl Batch {
    /// A batch named `name` (for people: the dashboard shows it) whose `callback` runs
    /// once it is sealed and every member has finished.
    pub fn new<J: Job>(name: impl Into<String>, callback: EnqueueRequest<J>) -> Batch {
        Batch {
            name: name.into(),
            callback: callback.to_new_job(),
            members: Vec::new(),
            seal: false,
            invalid: None,
        }
    }

    /// Adds a member.
    pub fn add<J: Job>(&mut self, request: EnqueueRequest<J>) -> &mut Batch {
        match request.to_new_job() {
            Ok(job) => self.members.push(job),
            Err(e) => {
                self.invalid.get_or_insert(e);
            }
        }
        self
    }

    /// Seals it as it is enqueued: these are all its members.
    pub fn sealed(mut self) -> Batch {
        self.seal = true;
        self
    }

    /// Opens the batch through `target`, in one transaction: the caller's when `target`
    /// is a connection inside one (roll back, and none of it existed).
    pub async fn enqueue<E: Enqueuer>(self, target: E) -> Result<EnqueuedBatch> {
        if let Some(e) = self.invalid {
            return Err(e);
        }
        let mut callback = self.callback?;
        let mut members = self.members;
        let mut chain = InsertChain::current();
        chain.before(std::iter::once(&mut callback).chain(members.iter_mut()))?;
        let change = BatchChange {
            target: BatchTarget::New { name: self.name, callback: Box::new(callback) },
            members,
            seal: self.seal,
        };
        let BatchChanged { batch_id, callback_id, members, released } =
            chain.around(target.change_batch(&change)).await?;
        if let BatchTarget::New { callback, .. } = &change.target {
            let callback_inserted = Inserted { id: callback_id, existing: false };
            chain.after(
                std::iter::once((&**callback, &callback_inserted)).chain(change.members.iter().zip(&members)),
            );
        }
        Ok(EnqueuedBatch { id: BatchId(batch_id), callback_id, members, released })
    }
}

/// A batch that exists: add members to it, or seal it, from any process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchId(pub i64);

impl BatchId {
    /// Adds `members` through `target`, in one transaction (the caller's, for a
    /// connection in one). Refused once the batch is sealed
    /// ([`WorkflowError::BatchSealed`](jobs_driver::WorkflowError)).
    pub async fn add<J: Job, E: Enqueuer>(
        self,
        target: E,
        members: impl IntoIterator<Item = EnqueueRequest<J>>,
    ) -> Result<Vec<Enqueued>> {
        let mut members = members.into_iter().map(|m| m.to_new_job()).collect::<Result<Vec<NewJob>>>()?;
        let mut chain = InsertChain::current();
        chain.before(members.iter_mut())?;
        let change = BatchChange { target: BatchTarget::Existing(self.0), members, seal: false };
        let added = chain.around(target.change_batch(&change)).await?.members;
        chain.after(change.members.iter().zip(&added));
        Ok(added)
    }

    /// Seals it: no member may join after this, and its callback runs once every member
    /// has finished (now, if all have). Returns whether this released the callback.
    /// Sealing twice does nothing the second time.
    pub async fn seal<E: Enqueuer>(self, target: E) -> Result<bool> {
        let change = BatchChange { target: BatchTarget::Existing(self.0), members: Vec::new(), seal: true };
        Ok(target.change_batch(&change).await?.released)
    }
}

/// What opening a batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueuedBatch {
    /// The batch (its workflow's id).
    pub id: BatchId,
    /// Its callback's job.
    pub callback_id: i64,
    /// Each member's job, in the order they were added.
    pub members: Vec<Enqueued>,
    /// The callback is due already (sealed with every member finished, or with none).
    pub released: bool,
}

/// How a batch's members ended, as its callback reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// Members that completed.
    pub completed: u64,
    /// Members discarded (their attempts ran out).
    pub discarded: u64,
    /// Members cancelled (or deleted).
    pub cancelled: u64,
}

/// What a batch's callback reads.
impl JobContext {
    /// How this batch callback's members ended. (In any other job: all zero.)
    pub async fn batch_counts(&self) -> Result<BatchCounts> {
        let mut counts = BatchCounts::default();
        for d in self.dependencies().await? {
            if d.needs != jobs_driver::Needs::Finished {
                continue;
            }
            match d.outcome {
                Some(JobState::Completed) => counts.completed += 1,
                Some(JobState::Discarded) => counts.discarded += 1,
                Some(JobState::Cancelled) => counts.cancelled += 1,
                _ => {}
            }
        }
        Ok(counts)
    }
}
