//! The one-column rows (declared once, in `jobs_driver::rows`) and JSON columns.

pub(crate) use jobs_driver::rows::{Count, Flag, Id, Name};

/// Decodes a JSON column, its failure as a driver error naming the column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> jobs_driver::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        jobs_driver::DriverError::unexpected(format!("column {column} is not the JSON it should be: {e}"))
    })
}

/// A fresh token for a statement to stamp its rows with (`jobs.lock_token`).
pub(crate) fn token() -> i64 {
    rand::random::<i64>()
}
