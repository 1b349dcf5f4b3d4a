//! The row a raw-SQL ceiling's claim reads back (SQLite and MariaDB; Postgres's ceiling
//! runs in pgbench).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};

/// A claimed job: its id, and its arguments (fetched as a worker would, not read).
#[derive(QueryableByName)]
pub(crate) struct Claimed {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
    #[diesel(sql_type = Text)]
    #[allow(dead_code)]
    pub(crate) args: String,
}
