//! Per-kind job defaults, set by `#[job(...)]` or [`Job::options`](crate::Job::options).

use std::borrow::Cow;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::unique::UniqueOptions;

/// The queue jobs go to when nothing else is said.
pub const DEFAULT_QUEUE: &str = "default";

pub use jobs_driver::DEFAULT_MAX_ATTEMPTS;

/// The defaults a job kind's rows are inserted with; every one can be overridden per call
/// on [`EnqueueRequest`](crate::EnqueueRequest).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobOptions {
    /// The queue (default `"default"`).
    pub queue: Cow<'static, str>,
    /// Lower runs first (default 0).
    pub priority: i16,
    /// Attempts before the job is discarded (default 20).
    pub max_attempts: i32,
    /// Time limit per attempt (default none).
    pub timeout: Option<Duration>,
    /// Delay between attempts (default attempt⁴ + 15 s).
    pub backoff: Backoff,
    /// De-duplication (default none).
    pub unique: Option<UniqueOptions>,
    /// Tags added to every job of the kind.
    pub tags: Vec<Cow<'static, str>>,
    /// Where each job's partition key comes from (default none): the key per-key limits
    /// count by (see [`JobOptions::limit`]).
    pub partition_by: Option<PartitionBy>,
    /// At most this many jobs of the kind's queue running at once across the cluster: per
    /// partition key when the kind has [`partition_by`](JobOptions::partition_by), in all
    /// otherwise (default none). Workers that run the queue declare it; a limit stored for
    /// the queue (dashboard, CLI, `Control::set_queue_limits`) takes its place.
    pub limit: Option<u32>,
}

/// Where a job's partition key comes from: the per-key limits of its queue count its
/// running jobs by this key. A string is the key as it is, a number or boolean as written.
/// A job whose field is null, an empty string, an array or an object has no key (its
/// queue's unkeyed jobs share one place in turn). A field the arguments do not have, and a
/// key of over 255 characters, with a control character or with white space at an end,
/// are refused at enqueue. The path names the fields as serialized: `#[job]` checks them
/// against the Rust names, so a struct whose fields serde renames takes its key from
/// `.partition_key(..)` on each request, or from `JobOptions::partition_by` in an `impl Job`
/// with the serialized name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionBy {
    /// A field of the arguments: `"customer_id"`, or a dotted path `"customer.id"` (`"0"`
    /// for a tuple's first field).
    Arg(Cow<'static, str>),
    /// A metadata entry set at enqueue (`.meta("tenant", ..)`).
    Meta(Cow<'static, str>),
}

impl PartitionBy {
    /// The key this source gives a job with arguments `args` (as JSON) and metadata `meta`;
    /// an error when the arguments have no such field (a field renamed by serde is found
    /// by its new name only): a silent "no key" would put every job in one group.
    pub(crate) fn key(
        &self,
        args: Option<&serde_json::Value>,
        meta: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Option<String>, String> {
        let value = match self {
            PartitionBy::Arg(path) => {
                let missing = || {
                    format!(
                        "the arguments have no field `{path}` as serialized (a field renamed by serde is \
                         found by its new name only; set the key with .partition_key(..))"
                    )
                };
                let mut value = args.ok_or_else(missing)?;
                for field in path.split('.') {
                    value = match value {
                        // A null on the way (an `Option` that is `None`): no key.
                        serde_json::Value::Null => return Ok(None),
                        // A number steps into an array (a tuple's field), a name into an object.
                        serde_json::Value::Array(items) => {
                            field.parse::<usize>().ok().and_then(|i| items.get(i))
                        }
                        value => value.get(field),
                    }
                    .ok_or_else(missing)?;
                }
                value
            }
            PartitionBy::Meta(name) => match meta.get(name.as_ref()) {
                Some(value) => value,
                None => return Ok(None),
            },
        };
        Ok(jobs_driver::partition::key_text(value))
    }
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions::new()
    }
}

impl JobOptions {
    /// The defaults: queue `default`, priority 0, 20 attempts, no timeout, polynomial backoff.
    pub const fn new() -> Self {
        JobOptions {
            queue: Cow::Borrowed(DEFAULT_QUEUE),
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            timeout: None,
            backoff: Backoff::Polynomial,
            unique: None,
            tags: Vec::new(),
            partition_by: None,
            limit: None,
        }
    }

    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<Cow<'static, str>>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Sets the priority (lower runs first).
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the number of attempts.
    pub fn max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Sets the time limit per attempt.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the backoff policy.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Makes the kind unique.
    pub fn unique(mut self, unique: UniqueOptions) -> Self {
        self.unique = Some(unique);
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<Cow<'static, str>>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Gives each job a partition key from `by`.
    pub fn partition_by(mut self, by: PartitionBy) -> Self {
        self.partition_by = Some(by);
        self
    }

    /// Declares the kind's limit (see [`JobOptions::limit`]).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }
}
