//! A job's partition key as the engine reads it.

use crate::validation::PARTITION_META_KEY;

/// A job's partition key, read from its metadata's JSON text (`None`: unkeyed). As the
/// databases read it: the entry's string.
pub fn partition_key_of(meta: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(meta).ok()?;
    value.get(PARTITION_META_KEY)?.as_str().map(str::to_owned)
}

/// The key a JSON value makes: a string as it is, a number or boolean as written; `None`
/// for null, an empty string, an array or an object.
pub fn key_text(value: &serde_json::Value) -> Option<String> {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}
