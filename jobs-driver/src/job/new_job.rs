//! A job to insert, and what inserting it did.

use std::borrow::Cow;

use chrono::{DateTime, Utc};

use crate::state::JobState;
use crate::validation::{self, InvalidJob};

/// A job to insert, already encoded. Built by the typed enqueue API (`EnqueueRequest`);
/// build it directly to insert jobs of several kinds at once.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The job kind (borrowed for typed jobs: their kind is a constant).
    pub kind: Cow<'static, str>,
    /// The queue (borrowed when it is the kind's default).
    pub queue: Cow<'static, str>,
    /// The arguments as JSON text.
    pub args: String,
    /// Metadata as a JSON object's text (borrowed `{}` when there is none).
    pub meta: Cow<'static, str>,
    /// Tags (letters, digits and `_ - . : /`).
    pub tags: Vec<String>,
    /// Priority: lower runs first.
    pub priority: i16,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Per-attempt time limit in milliseconds.
    pub timeout_ms: Option<i64>,
    /// Run at this time (absolute).
    pub run_at: Option<DateTime<Utc>>,
    /// Run after this many milliseconds, counted on the database clock.
    pub delay_ms: Option<i64>,
    /// The uniqueness key's hash and the states in which it is unique.
    pub unique: Option<(Vec<u8>, Vec<JobState>)>,
}

/// The default number of attempts.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 20;

impl NewJob {
    /// A job of `kind` on `queue` with `args` (JSON text) and every other field at its
    /// default: no metadata or tags, priority 0, the default attempts, no timeout, due now.
    /// For rows that do not come from a typed job (the CLI, tests); typed jobs are built
    /// with `build`/`enqueue`, which also validate.
    pub fn new(kind: impl Into<String>, queue: impl Into<String>, args: impl Into<String>) -> NewJob {
        NewJob {
            kind: Cow::Owned(kind.into()),
            queue: Cow::Owned(queue.into()),
            args: args.into(),
            meta: Cow::Borrowed("{}"),
            tags: Vec::new(),
            priority: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            timeout_ms: None,
            run_at: None,
            delay_ms: None,
            unique: None,
        }
    }

    /// Whether every job of `jobs` differs from the first only in its arguments, and none
    /// carries a uniqueness key: such a batch can be inserted with its shared columns sent
    /// once (both drivers do). `false` for an empty batch.
    ///
    /// ```
    /// use jobs_driver::NewJob;
    ///
    /// let a = NewJob::new("k", "q", "1");
    /// let b = NewJob::new("k", "q", "2");
    /// assert!(NewJob::all_differ_only_in_args([&a, &b]));
    /// let mut c = NewJob::new("k", "q", "3");
    /// c.priority = 1;
    /// assert!(!NewJob::all_differ_only_in_args([&a, &c]));
    /// ```
    pub fn all_differ_only_in_args<'a>(jobs: impl IntoIterator<Item = &'a NewJob>) -> bool {
        let mut jobs = jobs.into_iter();
        let Some(first) = jobs.next() else { return false };
        first.unique.is_none()
            && jobs.all(|job| {
                job.unique.is_none()
                    && job.kind == first.kind
                    && job.queue == first.queue
                    && job.meta == first.meta
                    && job.tags == first.tags
                    && job.priority == first.priority
                    && job.max_attempts == first.max_attempts
                    && job.timeout_ms == first.timeout_ms
                    && job.run_at == first.run_at
                    && job.delay_ms == first.delay_ms
            })
    }

    /// The value of metadata key `key`, if the metadata is an object that holds it.
    ///
    /// ```
    /// let mut job = jobs_driver::NewJob::new("k", "q", "{}");
    /// job.set_meta("tenant", "acme").expect("metadata is an object");
    /// assert_eq!(job.meta_value("tenant"), Some(serde_json::json!("acme")));
    /// assert_eq!(job.meta_value("other"), None);
    /// ```
    pub fn meta_value(&self, key: &str) -> Option<serde_json::Value> {
        let mut meta: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&self.meta).ok()?;
        meta.remove(key)
    }

    /// Sets metadata key `key` to `value` (the metadata's text is encoded again). Fails,
    /// changing nothing, when the metadata is not a JSON object.
    pub fn set_meta(
        &mut self,
        key: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Result<(), serde_json::Error> {
        let mut meta: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&self.meta)?;
        meta.insert(key.into(), value.into());
        self.meta = Cow::Owned(serde_json::to_string(&meta)?);
        Ok(())
    }

    /// Checks the row against the rules of [`validation`]: names, tags, attempts,
    /// timeout, payloads, and a uniqueness key with at least one state.
    pub fn validate(&self) -> Result<(), InvalidJob> {
        validation::validate_kind(&self.kind)?;
        validation::validate_queue(&self.queue)?;
        validation::validate_max_attempts(self.max_attempts)?;
        validation::validate_timeout_ms(self.timeout_ms)?;
        for tag in &self.tags {
            validation::validate_tag(tag)?;
        }
        if self.unique.as_ref().is_some_and(|(_, states)| states.is_empty()) {
            return Err(InvalidJob::Option {
                option: "unique.states",
                reason: "uniqueness needs at least one state".into(),
            });
        }
        validation::validate_payload(&self.kind, "arguments", &self.args)?;
        validation::validate_payload(&self.kind, "metadata", &self.meta)?;
        validation::validate_meta_partition_key(&self.meta)
    }
}

/// What inserting one job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// The new job's id, or the id of the job that already held the uniqueness key.
    pub id: i64,
    /// `true` when nothing was inserted because a job with the same uniqueness key exists.
    pub existing: bool,
}
