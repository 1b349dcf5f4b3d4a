//! Limits on the text a job run writes back: error messages, backtraces and results.
//!
//! Whatever a handler returns must be storable, or the whole completion batch it shares
//! would be rejected. Postgres refuses NUL characters in `text` and `jsonb`, and a
//! multi-megabyte error message would bloat the row forever; so messages and backtraces
//! are clipped (with a note saying how long they were) and NULs become U+FFFD, and a
//! result that is too large or holds a NUL is replaced by a note saying so.

use std::borrow::Cow;

/// The longest error message kept, in bytes; the rest is cut off with a note.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 64 * 1024;

/// The longest backtrace kept, in bytes.
pub const MAX_BACKTRACE_BYTES: usize = 64 * 1024;

/// The largest result stored, in bytes of JSON; a larger one is replaced by a note.
pub const MAX_RESULT_BYTES: usize = 1 << 20;

/// `text` made storable: NUL characters replaced by U+FFFD, and cut at a character
/// boundary to at most `limit` bytes plus a note giving the original length.
pub fn clip(text: &str, limit: usize) -> Cow<'_, str> {
    let has_nul = text.contains('\0');
    if !has_nul && text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut clipped = text[..end].replace('\0', "\u{FFFD}");
    if end < text.len() {
        clipped.push_str(&format!(" … [cut: {} bytes in all]", text.len()));
    }
    Cow::Owned(clipped)
}

/// Whether JSON text may hold an escaped NUL (`\u0000`), which `jsonb` rejects. A cheap
/// check that can say yes for an escaped backslash followed by `u0000`; callers then
/// look at the parsed value.
pub fn may_hold_nul(json: &str) -> bool {
    json.contains("\\u0000")
}

/// Whether JSON text holds a NUL character in a string or key (which `jsonb` rejects).
pub fn holds_nul(json: &str) -> bool {
    fn walk(value: &serde_json::Value) -> bool {
        use serde_json::Value;
        match value {
            Value::String(s) => s.contains('\0'),
            Value::Array(items) => items.iter().any(walk),
            Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || walk(v)),
            _ => false,
        }
    }
    may_hold_nul(json) && serde_json::from_str::<serde_json::Value>(json).is_ok_and(|v| walk(&v))
}

/// The value with NUL characters in its strings and keys replaced by U+FFFD.
fn without_nul(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) if s.contains('\0') => Value::String(s.replace('\0', "\u{FFFD}")),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nul).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter().map(|(k, v)| (k.replace('\0', "\u{FFFD}"), without_nul(v))).collect(),
        ),
        other => other,
    }
}

/// A handler's result (JSON text) made storable: NULs replaced, and a result over
/// [`MAX_RESULT_BYTES`] replaced by a note. The job still completes: its work was done.
pub fn storable_result(json: String) -> String {
    let json = if may_hold_nul(&json) {
        match serde_json::from_str::<serde_json::Value>(&json) {
            Ok(value) => without_nul(value).to_string(),
            Err(_) => json,
        }
    } else {
        json
    };
    if json.len() > MAX_RESULT_BYTES {
        return serde_json::json!({
            "result_omitted": format!(
                "the result was {} bytes of JSON, over the {MAX_RESULT_BYTES}-byte limit",
                json.len()
            )
        })
        .to_string();
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_clean_text_is_borrowed() {
        assert!(matches!(clip("fine", 10), Cow::Borrowed("fine")));
    }

    #[test]
    fn nul_is_replaced_and_long_text_cut_at_a_char_boundary() {
        assert_eq!(clip("a\0b", 10), "a\u{FFFD}b");
        let long = "é".repeat(10); // 20 bytes
        let clipped = clip(&long, 5);
        assert!(clipped.starts_with("éé …"), "{clipped}");
        assert!(clipped.ends_with("[cut: 20 bytes in all]"), "{clipped}");
    }

    #[test]
    fn nul_detection_ignores_an_escaped_backslash() {
        assert!(holds_nul(r#"{"a":["\u0000"]}"#));
        assert!(!holds_nul(r#"{"a":"\\u0000"}"#));
        assert!(!holds_nul(r#"{"a":"plain"}"#));
    }

    #[test]
    fn results_lose_nul_and_oversize() {
        assert_eq!(storable_result(r#"{"a\u0000":"x\u0000"}"#.into()), "{\"a\u{FFFD}\":\"x\u{FFFD}\"}");
        assert_eq!(storable_result(r#""\\u0000""#.into()), r#""\\u0000""#);
        let big = serde_json::Value::String("x".repeat(MAX_RESULT_BYTES + 1)).to_string();
        assert!(storable_result(big).contains("result_omitted"));
    }
}
