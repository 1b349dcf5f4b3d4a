//! Loading `jsonb` columns as JSON text, decoded later straight into the job's own type.

use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::pg::{Pg, PgValue};
use diesel::sql_types::Jsonb;
use serde_json::value::RawValue;

/// A `jsonb` value kept as its JSON text.
///
/// Job arguments go from the row to the handler's argument type in one `serde_json` pass,
/// without building a `serde_json::Value` in between.
#[derive(Debug, Clone, FromSqlRow)]
pub struct RawJson(pub Box<RawValue>);

impl RawJson {
    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parses the text into a `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.0.get()).unwrap_or(serde_json::Value::Null)
    }
}

impl FromSql<Jsonb, Pg> for RawJson {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        // jsonb's binary form is a version byte (1) followed by the JSON text.
        let bytes = value.as_bytes();
        match bytes.split_first() {
            Some((1, text)) => {
                let text = std::str::from_utf8(text)?;
                Ok(RawJson(RawValue::from_string(text.to_owned())?))
            }
            _ => Err("unsupported jsonb encoding".into()),
        }
    }
}
