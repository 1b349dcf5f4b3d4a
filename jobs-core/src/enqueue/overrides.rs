//! What a request says instead of its kind's options ([`Overrides`]), its setters, and the
//! row it makes: one definition for the typed [`EnqueueRequest`](crate::EnqueueRequest)
//! and the by-name [`KindRequest`](crate::KindRequest).

use std::borrow::Cow;
use std::time::Duration;

use chrono::{DateTime, Utc};
use jobs_driver::NewJob;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::options::{JobOptions, PartitionBy};
use crate::unique::{UniqueBy, UniqueOptions};

/// What a request says instead of its kind's options.
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
    pub(crate) partition_key: Option<String>,
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

        /// Sets the job's partition key (a customer, a tenant), in place of the one its
        /// kind's `partition_by` gives: its queue's per-key limits count it under this key.
        /// 1 to 255 characters.
        pub fn partition_key(mut self, key: impl Into<String>) -> Self {
            self.overrides.partition_key = Some(key.into());
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
        let by_arg =
            self.partition_key.is_none() && matches!(defaults.partition_by, Some(PartitionBy::Arg(_)));
        // Canonical form (sorted keys) so equal arguments hash equally.
        let value = match unique.is_some() || by_arg {
            true => Some(serde_json::to_value(args).map_err(encode)?),
            false => None,
        };
        let partition_key = match (&self.partition_key, &defaults.partition_by) {
            (Some(explicit), _) => {
                jobs_driver::validation::validate_partition_key(explicit)?;
                Some(explicit.clone())
            }
            (None, Some(by)) => by
                .key(value.as_ref(), &self.meta)
                .map_err(|reason| Error::InvalidOption { option: "partition_by", reason })?,
            (None, None) => None,
        };
        let (args, unique) = match value {
            Some(value) => {
                let unique = unique.map(|(options, explicit)| {
                    let key = options.key(&kind, &queue, &value, explicit, Utc::now().timestamp());
                    (key, options.states)
                });
                (value.to_string(), unique)
            }
            None => (serde_json::to_string(args).map_err(encode)?, None),
        };
        let meta = match partition_key {
            Some(key) => {
                let mut meta = self.meta.clone();
                meta.insert(jobs_driver::partition::PARTITION_META_KEY.to_owned(), key.into());
                Cow::Owned(serde_json::Value::Object(meta).to_string())
            }
            None if self.meta.is_empty() => Cow::Borrowed("{}"),
            None => Cow::Owned(serde_json::Value::Object(self.meta.clone()).to_string()),
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
