//! The rules every job row obeys, in one place: the enqueue API checks new rows with
//! [`NewJob::validate`](crate::NewJob::validate) (typed requests and rows built by hand
//! alike), and the fault tests check stored rows with
//! [`JobRow::invariant_violations`](crate::JobRow::invariant_violations). Tables check
//! only that finished jobs carry their finish time (each CHECK costs every row version).

use crate::queue_limits::{MAX_RATE_ALLOWED, MAX_RATE_PERIOD_SECS, RateLimit};
use crate::stored_text::holds_nul;

/// The largest argument (and metadata) payload accepted, in bytes of JSON.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// The longest queue name, in characters.
pub const MAX_QUEUE_CHARS: usize = 128;

/// The longest kind name, in characters.
pub const MAX_KIND_CHARS: usize = 255;

/// The longest tag, in bytes.
pub const MAX_TAG_BYTES: usize = 100;

/// A row that breaks a rule: which value, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidJob {
    /// A field has a value outside its range.
    #[error("invalid option `{option}`: {reason}")]
    Option {
        /// The field (`queue`, `kind`, `tag`, `max_attempts`, `timeout`, `unique.states`).
        option: &'static str,
        /// Why the value is rejected.
        reason: String,
    },

    /// A payload is larger than [`MAX_PAYLOAD_BYTES`].
    #[error("the {what} of job kind `{kind}` are {size} bytes, over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The job kind.
        kind: String,
        /// `arguments` or `metadata`.
        what: &'static str,
        /// The size of the encoded payload.
        size: usize,
        /// The limit in force.
        limit: usize,
    },

    /// A payload holds a NUL character, which Postgres cannot store in `jsonb`.
    #[error("the {what} of job kind `{kind}` contain a NUL character (\\u0000), which Postgres cannot store")]
    NulInPayload {
        /// The job kind.
        kind: String,
        /// `arguments` or `metadata`.
        what: &'static str,
    },
}

/// The most slots a queue may be given across the cluster (`queue_set_concurrency`).
pub const MAX_CONCURRENCY: i32 = 100_000;

/// A queue's concurrency set for the cluster: 1 to [`MAX_CONCURRENCY`].
pub fn validate_concurrency(concurrency: i64) -> Result<(), InvalidJob> {
    if !(1..=i64::from(MAX_CONCURRENCY)).contains(&concurrency) {
        return Err(invalid(
            "concurrency",
            format!("a queue's concurrency is 1 to {MAX_CONCURRENCY} slots per node, not {concurrency}"),
        ));
    }
    Ok(())
}

/// A queue's global limit (at most this many of its jobs running across the cluster): 1
/// to [`MAX_CONCURRENCY`].
pub fn validate_global_limit(limit: i64) -> Result<(), InvalidJob> {
    if !(1..=i64::from(MAX_CONCURRENCY)).contains(&limit) {
        return Err(invalid(
            "global_limit",
            format!(
                "a queue's global limit is 1 to {MAX_CONCURRENCY} jobs running across the cluster, not {limit}"
            ),
        ));
    }
    Ok(())
}

/// A queue's per-key limit: 1 to [`MAX_CONCURRENCY`] jobs running at once per partition
/// key, across the cluster.
pub fn validate_per_key_limit(limit: i64) -> Result<(), InvalidJob> {
    if !(1..=i64::from(MAX_CONCURRENCY)).contains(&limit) {
        return Err(invalid(
            "per_key_limit",
            format!("a queue's per-key limit is 1 to {MAX_CONCURRENCY} jobs running per key, not {limit}"),
        ));
    }
    Ok(())
}

/// The metadata entry that holds a job's partition key ([`crate::partition`]).
pub const PARTITION_META_KEY: &str = "_partition_key";

/// The longest partition key, in characters (it is indexed).
pub const MAX_PARTITION_KEY_CHARS: usize = 255;

/// A partition key ([`crate::partition`]): 1 to [`MAX_PARTITION_KEY_CHARS`] characters, no
/// control characters, no white space at either end (MariaDB and MySQL compare strings
/// without their trailing spaces: `"a"` and `"a "` would be one key there and two here).
pub fn validate_partition_key(key: &str) -> Result<(), InvalidJob> {
    let chars = key.chars().count();
    if chars == 0 || chars > MAX_PARTITION_KEY_CHARS {
        return Err(invalid(
            "partition_key",
            format!("a partition key is 1 to {} characters, not {chars}", MAX_PARTITION_KEY_CHARS),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(invalid("partition_key", format!("a partition key has no control characters: {key:?}")));
    }
    if key.trim() != key {
        return Err(invalid(
            "partition_key",
            format!("a partition key has no white space at its ends: {key:?}"),
        ));
    }
    Ok(())
}

/// The partition key in a job's metadata (JSON text), if it has one: a string that
/// [`validate_partition_key`] accepts. Any other value there is refused, so that every
/// backend reads the same key the engine does.
pub fn validate_meta_partition_key(meta: &str) -> Result<(), InvalidJob> {
    if meta == "{}" {
        return Ok(());
    }
    // Databases differ on which of two equal names they read: refuse a second one.
    if meta.matches(&format!("\"{PARTITION_META_KEY}\"")).count() > 1 {
        return Err(invalid("partition_key", "the metadata names its partition key twice".into()));
    }
    let value: serde_json::Value = serde_json::from_str(meta)
        .map_err(|e| invalid("meta", format!("metadata is not valid JSON: {e}")))?;
    match value.get(PARTITION_META_KEY) {
        None => Ok(()),
        Some(serde_json::Value::String(key)) => validate_partition_key(key),
        Some(other) => Err(invalid("partition_key", format!("a partition key is a string, not {other}"))),
    }
}

/// A queue's rate limit: 1 to [`MAX_RATE_ALLOWED`] jobs per 1 to [`MAX_RATE_PERIOD_SECS`]
/// seconds.
pub fn validate_rate_limit(allowed: i64, period_secs: i64) -> Result<RateLimit, InvalidJob> {
    if !(1..=i64::from(MAX_RATE_ALLOWED)).contains(&allowed) {
        return Err(invalid(
            "rate_limit",
            format!("a rate limit allows 1 to {MAX_RATE_ALLOWED} jobs per period, not {allowed}"),
        ));
    }
    RateLimit::new(allowed, period_secs).ok_or_else(|| {
        invalid(
            "rate_limit",
            format!("a rate limit's period is 1 to {MAX_RATE_PERIOD_SECS} seconds, not {period_secs}"),
        )
    })
}

fn invalid(option: &'static str, reason: String) -> InvalidJob {
    InvalidJob::Option { option, reason }
}

/// A queue name: 1 to [`MAX_QUEUE_CHARS`] characters, none of them a control character.
pub fn validate_queue(queue: &str) -> Result<(), InvalidJob> {
    if queue.is_empty() || queue.chars().count() > MAX_QUEUE_CHARS || queue.chars().any(char::is_control) {
        return Err(invalid(
            "queue",
            format!(
                "`{}`: queue names are 1 to {MAX_QUEUE_CHARS} printable characters",
                queue.escape_debug()
            ),
        ));
    }
    Ok(())
}

/// A kind name: 1 to [`MAX_KIND_CHARS`] characters (`#[job]` checks its kinds at compile
/// time; this is for rows built by hand).
pub fn validate_kind(kind: &str) -> Result<(), InvalidJob> {
    if kind.is_empty() || kind.chars().count() > MAX_KIND_CHARS {
        return Err(invalid(
            "kind",
            format!("`{}`: kinds are 1 to {MAX_KIND_CHARS} characters", kind.escape_debug()),
        ));
    }
    Ok(())
}

/// A tag: 1 to [`MAX_TAG_BYTES`] letters, digits and `_ - . : /`.
pub fn validate_tag(tag: &str) -> Result<(), InvalidJob> {
    let ok = !tag.is_empty()
        && tag.len() <= MAX_TAG_BYTES
        && tag.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "tag",
            format!("`{tag}`: tags are 1 to {MAX_TAG_BYTES} characters of letters, digits and _ - . : /"),
        ))
    }
}

/// Attempts allowed: at least one.
pub fn validate_max_attempts(max_attempts: i32) -> Result<(), InvalidJob> {
    if max_attempts < 1 {
        return Err(invalid("max_attempts", format!("{max_attempts}: a job needs at least one attempt")));
    }
    Ok(())
}

/// A per-attempt limit, when there is one: positive.
pub fn validate_timeout_ms(timeout_ms: Option<i64>) -> Result<(), InvalidJob> {
    if timeout_ms.is_some_and(|ms| ms <= 0) {
        return Err(invalid("timeout", "a timeout must be positive".into()));
    }
    Ok(())
}

/// A JSON payload (`arguments` or `metadata`) of a job of `kind`: at most
/// [`MAX_PAYLOAD_BYTES`], and no NUL character.
pub fn validate_payload(kind: &str, what: &'static str, json: &str) -> Result<(), InvalidJob> {
    if json.len() > MAX_PAYLOAD_BYTES {
        return Err(InvalidJob::PayloadTooLarge {
            kind: kind.to_owned(),
            what,
            size: json.len(),
            limit: MAX_PAYLOAD_BYTES,
        });
    }
    if holds_nul(json) {
        return Err(InvalidJob::NulInPayload { kind: kind.to_owned(), what });
    }
    Ok(())
}

/// The most steps one workflow insert takes.
pub const MAX_WORKFLOW_STEPS: usize = 100_000;

/// The longest workflow name, in characters.
pub const MAX_WORKFLOW_NAME: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tags_attempts_and_timeouts_have_one_rule_each() {
        assert!(validate_queue("mailers").is_ok());
        assert!(validate_queue("").is_err());
        assert!(validate_queue(&"q".repeat(MAX_QUEUE_CHARS + 1)).is_err());
        assert!(validate_queue("a\nb").is_err());
        assert!(validate_kind(&"k".repeat(MAX_KIND_CHARS)).is_ok());
        assert!(validate_kind(&"k".repeat(MAX_KIND_CHARS + 1)).is_err());
        assert!(validate_tag("billing:eu/2").is_ok());
        assert!(validate_tag("no spaces").is_err());
        assert!(validate_max_attempts(0).is_err());
        assert!(validate_timeout_ms(Some(0)).is_err());
        assert!(validate_timeout_ms(None).is_ok());
        assert!(matches!(
            validate_payload("k", "arguments", r#"{"a":"\u0000"}"#),
            Err(InvalidJob::NulInPayload { .. })
        ));
    }

    #[test]
    fn queue_limits_are_bounded() {
        assert!(validate_concurrency(0).is_err());
        assert!(validate_concurrency(i64::from(MAX_CONCURRENCY) + 1).is_err());
        assert!(validate_global_limit(1).is_ok());
        assert!(validate_per_key_limit(1).is_ok());
        assert!(validate_per_key_limit(0).is_err());
        assert!(validate_partition_key("acme").is_ok());
        assert!(validate_partition_key("").is_err());
        assert!(validate_partition_key(&"k".repeat(256)).is_err());
        assert!(validate_partition_key("a\nb").is_err());
        assert!(validate_partition_key("a ").is_err(), "one key on MariaDB, two here");
        assert!(validate_partition_key(" a").is_err());
        assert!(validate_partition_key("a b").is_ok());
        assert!(validate_meta_partition_key(r#"{"_partition_key":"acme"}"#).is_ok());
        assert!(validate_meta_partition_key(r#"{"_partition_key":42}"#).is_err());
        assert!(validate_meta_partition_key(r#"{"_partition_key":""}"#).is_err());
        assert!(validate_meta_partition_key(r#"{"\u005fpartition_key":7}"#).is_err(), "read as JSON");
        assert!(validate_meta_partition_key(r#"{"partition_key":42}"#).is_ok(), "the application's own");
        assert!(validate_meta_partition_key(r#"{"_partition_key":"a","_partition_key":"b"}"#).is_err());
        assert!(validate_global_limit(0).is_err());
        assert!(validate_global_limit(i64::from(MAX_CONCURRENCY) + 1).is_err());
        assert_eq!(validate_rate_limit(60, 60).ok(), Some(RateLimit { allowed: 60, period_secs: 60 }));
        assert!(validate_rate_limit(0, 60).is_err());
        assert!(validate_rate_limit(-1, 60).is_err());
        assert!(validate_rate_limit(i64::from(MAX_RATE_ALLOWED) + 1, 60).is_err());
        assert!(validate_rate_limit(10, 0).is_err());
        assert!(validate_rate_limit(10, i64::from(MAX_RATE_PERIOD_SECS) + 1).is_err());
        assert!(validate_rate_limit(10, i64::MAX).is_err());
    }
}
