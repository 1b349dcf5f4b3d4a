//! Unique jobs: at most one job per key among the states the key is unique in.

use std::borrow::Cow;
use std::time::Duration;

use sha2::{Digest, Sha256};

use jobs_driver::JobState;

/// What makes two jobs "the same" for de-duplication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UniqueBy {
    /// The kind alone: one such job at a time.
    Kind,
    /// The whole arguments (compared as canonical JSON).
    Args,
    /// The listed top-level fields of the arguments.
    Fields(Vec<Cow<'static, str>>),
    /// A fixed key you choose.
    Key(Cow<'static, str>),
}

/// De-duplication settings of a job kind.
///
/// The key is a SHA-256 of the kind, the chosen part of the arguments (or your key), the
/// queue when [`by_queue`](Self::by_queue) is set, and the period's time bucket. A partial
/// unique index makes it unique among jobs whose state is in [`states`](Self::states).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueOptions {
    /// What identifies a duplicate.
    pub by: UniqueBy,
    /// Uniqueness lasts for this period: the key includes `floor(now / period)`.
    pub period: Option<Duration>,
    /// The states in which an existing job blocks a new one.
    pub states: Vec<JobState>,
    /// Whether jobs on different queues are distinct.
    pub by_queue: bool,
}

impl UniqueOptions {
    /// Unique by `by` among waiting and running jobs (available, scheduled, running,
    /// retryable: [`JobState::DEFAULT_UNIQUE`]), for all time, across queues.
    pub fn new(by: UniqueBy) -> Self {
        UniqueOptions { by, period: None, states: JobState::DEFAULT_UNIQUE.to_vec(), by_queue: false }
    }

    /// Limits uniqueness to a time bucket of this length.
    pub fn period(mut self, period: Duration) -> Self {
        self.period = Some(period);
        self
    }

    /// Sets the states in which a job blocks a duplicate.
    pub fn states(mut self, states: impl IntoIterator<Item = JobState>) -> Self {
        self.states = states.into_iter().collect();
        self.states.sort();
        self.states.dedup();
        self
    }

    /// Makes jobs on different queues distinct.
    pub fn by_queue(mut self) -> Self {
        self.by_queue = true;
        self
    }

    /// The key's hash for a job with these arguments, on this queue, at `now_unix_secs`.
    /// `explicit` (a per-call key) replaces the arguments part.
    pub fn key(
        &self,
        kind: &str,
        queue: &str,
        args: &serde_json::Value,
        explicit: Option<&str>,
        now_unix_secs: i64,
    ) -> Vec<u8> {
        let mut hasher = Sha256::new();
        let mut part = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        part(kind.as_bytes());
        if self.by_queue {
            part(queue.as_bytes());
        }
        match (explicit, &self.by) {
            (Some(key), _) => part(format!("key:{key}").as_bytes()),
            (None, UniqueBy::Kind) => part(b"kind"),
            (None, UniqueBy::Args) => part(format!("args:{args}").as_bytes()),
            (None, UniqueBy::Fields(fields)) => {
                let picked: Vec<serde_json::Value> = fields
                    .iter()
                    .map(|f| args.get(f.as_ref()).cloned().unwrap_or(serde_json::Value::Null))
                    .collect();
                part(format!("fields:{}", serde_json::Value::Array(picked)).as_bytes());
            }
            (None, UniqueBy::Key(key)) => part(format!("key:{key}").as_bytes()),
        }
        if let Some(period) = self.period {
            let secs = i64::try_from(period.as_secs()).unwrap_or(i64::MAX).max(1);
            part(format!("bucket:{}", now_unix_secs.div_euclid(secs)).as_bytes());
        }
        hasher.finalize().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_separate_what_they_should() {
        let by_args = UniqueOptions::new(UniqueBy::Args);
        let a = by_args.key("k", "q", &json!({"a": 1, "b": 2}), None, 0);
        assert_eq!(
            a,
            by_args.key("k", "other", &json!({"b": 2, "a": 1}), None, 0),
            "key order and queue ignored"
        );
        assert_ne!(a, by_args.key("k", "q", &json!({"a": 2, "b": 2}), None, 0));
        assert_ne!(a, by_args.key("k2", "q", &json!({"a": 1, "b": 2}), None, 0));
        assert_ne!(a, by_args.clone().by_queue().key("k", "other", &json!({"a": 1, "b": 2}), None, 0));

        let by_field = UniqueOptions::new(UniqueBy::Fields(vec!["a".into()]));
        assert_eq!(
            by_field.key("k", "q", &json!({"a": 1, "b": 2}), None, 0),
            by_field.key("k", "q", &json!({"a": 1, "b": 3}), None, 0)
        );

        let hourly = UniqueOptions::new(UniqueBy::Kind).period(Duration::from_secs(3600));
        assert_eq!(
            hourly.key("k", "q", &json!(null), None, 10),
            hourly.key("k", "q", &json!(null), None, 3599)
        );
        assert_ne!(
            hourly.key("k", "q", &json!(null), None, 10),
            hourly.key("k", "q", &json!(null), None, 3600)
        );

        assert_ne!(
            by_args.key("k", "q", &json!({}), Some("x"), 0),
            by_args.key("k", "q", &json!({}), Some("y"), 0)
        );
    }
}
