//! Operations on a connection of the application's own, so that they commit or roll back
//! with its transaction: insert jobs (async or sync diesel), cancel, retry or delete jobs,
//! pause or resume a queue, read a job. Their notifications go out when the transaction
//! commits. `jobs-core` calls these for `Enqueuer for &mut C`, `enqueue_sync`,
//! `cancel_job`, `retry_job`, `delete_job` and `set_queue_paused`.

pub use crate::jobs::control::{cancel_many, delete_many, retry_many};
pub use crate::jobs::insert::{insert_many, insert_many_sync};
pub use crate::jobs::read::get;
pub use crate::queues::set_paused;
