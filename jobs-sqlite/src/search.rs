//! Search of arguments and metadata: `jobs_json_contains(doc, subset)`, an SQL function
//! every driver connection registers, with the containment rules of Postgres's `jsonb @>`
//! (`jobs_driver::json_contains`, the one definition of them).

use diesel::SqliteConnection;
use diesel::sql_types::Text;
use jobs_driver::Result;

diesel::define_sql_function! {
    /// Whether the JSON text `doc` contains the JSON text `subset`.
    fn jobs_json_contains(doc: Text, subset: Text) -> Bool;
}

/// Registers `jobs_json_contains` on `conn`. A document that is not JSON contains nothing.
pub(crate) fn register(conn: &mut SqliteConnection) -> Result<()> {
    jobs_json_contains_utils::register_impl(conn, |doc: String, subset: String| {
        match (serde_json::from_str(&doc), serde_json::from_str(&subset)) {
            (Ok(doc), Ok(subset)) => jobs_driver::json_contains(&doc, &subset),
            _ => false,
        }
    })?;
    Ok(())
}
