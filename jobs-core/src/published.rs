//! A kind's options as its nodes publish them with their heartbeats: what the dashboard's
//! form and `jobs-dashboard enqueue`, which do not link the application's jobs, enqueue a
//! kind by name with, so that its row gets what `#[job(...)]` declares (queue, attempts,
//! timeout, priority, tags, uniqueness, partition key), as a typed request's does.
//!
//! The backoff is not published: it is the worker's, applied when an attempt fails.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::options::{JobOptions, PartitionBy};
use crate::unique::{UniqueBy, UniqueOptions};
use jobs_driver::JobState;

/// [`JobOptions`] as JSON, backoff left out. A field left out reads as its default (a
/// schedule stored by hand may give only its queue).
#[derive(Debug, Serialize, Deserialize)]
struct Published {
    #[serde(default = "default_queue")]
    queue: String,
    #[serde(default)]
    priority: i16,
    #[serde(default = "default_max_attempts")]
    max_attempts: i32,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unique: Option<PublishedUnique>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    partition_by: Option<PublishedPartition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limit: Option<u32>,
}

/// [`PartitionBy`] as JSON: `{"arg": ".."}` or `{"meta": ".."}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PublishedPartition {
    Arg(String),
    Meta(String),
}

/// [`UniqueOptions`] as JSON.
#[derive(Debug, Serialize, Deserialize)]
struct PublishedUnique {
    by: PublishedBy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    period_ms: Option<u64>,
    states: Vec<JobState>,
    #[serde(default)]
    by_queue: bool,
}

/// [`UniqueBy`] as JSON: `"kind"`, `"args"`, `{"fields": [..]}`, `{"key": ".."}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PublishedBy {
    Kind,
    Args,
    Fields(Vec<String>),
    Key(String),
}

fn default_queue() -> String {
    crate::options::DEFAULT_QUEUE.to_owned()
}

fn default_max_attempts() -> i32 {
    crate::options::DEFAULT_MAX_ATTEMPTS
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl JobOptions {
    /// The options as a node publishes them for its kind (backoff left out: it applies on
    /// the worker). [`JobOptions::from_published`] reads them back.
    pub fn to_published(&self) -> serde_json::Value {
        let unique = self.unique.as_ref().map(|u| PublishedUnique {
            by: match &u.by {
                UniqueBy::Kind => PublishedBy::Kind,
                UniqueBy::Args => PublishedBy::Args,
                UniqueBy::Fields(fields) => {
                    PublishedBy::Fields(fields.iter().map(|f| f.to_string()).collect())
                }
                UniqueBy::Key(key) => PublishedBy::Key(key.to_string()),
            },
            period_ms: u.period.map(millis),
            states: u.states.clone(),
            by_queue: u.by_queue,
        });
        let published = Published {
            queue: self.queue.to_string(),
            priority: self.priority,
            max_attempts: self.max_attempts,
            timeout_ms: self.timeout.map(millis),
            tags: self.tags.iter().map(|t| t.to_string()).collect(),
            unique,
            partition_by: self.partition_by.as_ref().map(|p| match p {
                PartitionBy::Arg(path) => PublishedPartition::Arg(path.to_string()),
                PartitionBy::Meta(name) => PublishedPartition::Meta(name.to_string()),
            }),
            limit: self.limit,
        };
        serde_json::to_value(published).unwrap_or(serde_json::Value::Null)
    }

    /// Options read from [`JobOptions::to_published`]'s form, or `None` when `value` is not
    /// in it (a node of another version): the default backoff.
    pub fn from_published(value: &serde_json::Value) -> Option<JobOptions> {
        let published = Published::deserialize(value).ok()?;
        let mut options = JobOptions::new()
            .queue(published.queue)
            .priority(published.priority)
            .max_attempts(published.max_attempts);
        options.timeout = published.timeout_ms.map(Duration::from_millis);
        options.tags = published.tags.into_iter().map(Into::into).collect();
        options.partition_by = published.partition_by.map(|p| match p {
            PublishedPartition::Arg(path) => PartitionBy::Arg(path.into()),
            PublishedPartition::Meta(name) => PartitionBy::Meta(name.into()),
        });
        options.limit = published.limit;
        options.unique = published.unique.map(|u| {
            let by = match u.by {
                PublishedBy::Kind => UniqueBy::Kind,
                PublishedBy::Args => UniqueBy::Args,
                PublishedBy::Fields(fields) => UniqueBy::Fields(fields.into_iter().map(Into::into).collect()),
                PublishedBy::Key(key) => UniqueBy::Key(key.into()),
            };
            UniqueOptions {
                by,
                period: u.period_ms.map(Duration::from_millis),
                states: u.states,
                by_queue: u.by_queue,
            }
        });
        Some(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_come_back_as_published() {
        let unique = UniqueOptions::new(UniqueBy::Fields(vec!["user_id".into()]))
            .period(Duration::from_secs(3600))
            .states([JobState::Available, JobState::Running])
            .by_queue();
        let options = JobOptions::new()
            .queue("mailers")
            .priority(3)
            .max_attempts(5)
            .timeout(Duration::from_millis(1500))
            .tag("signup")
            .unique(unique.clone());
        let back = JobOptions::from_published(&options.to_published()).expect("reads back");
        assert_eq!(
            (back.queue.as_ref(), back.priority, back.max_attempts, back.timeout),
            ("mailers", 3, 5, Some(Duration::from_millis(1500)))
        );
        assert_eq!(back.tags, vec!["signup"]);
        assert_eq!(back.unique, Some(unique));
        for by in [UniqueBy::Kind, UniqueBy::Args, UniqueBy::Key("k".into())] {
            let options = JobOptions::new().unique(UniqueOptions::new(by.clone()));
            let back = JobOptions::from_published(&options.to_published()).expect("reads back");
            assert_eq!(back.unique.map(|u| u.by), Some(by));
        }
        let plain = JobOptions::from_published(&JobOptions::new().to_published()).expect("defaults");
        assert_eq!((plain.queue.as_ref(), plain.max_attempts, plain.unique), ("default", 20, None));
        assert!(JobOptions::from_published(&serde_json::json!(["an", "older", "form"])).is_none());
        // A field left out is its default; a stored `"timeout_ms": null` is no timeout.
        let partial = serde_json::json!({"queue": "reports", "timeout_ms": null});
        let partial = JobOptions::from_published(&partial).expect("partial");
        assert_eq!(
            (partial.queue.as_ref(), partial.priority, partial.max_attempts, partial.timeout),
            ("reports", 0, 20, None)
        );
    }
}
