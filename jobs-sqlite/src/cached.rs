//! [`CachedQuery`] on SQLite: `jobs_driver::cached::CachedQuery`, prepared once per
//! connection (diesel re-prepares every `sql_query`, ~10 µs a statement here).

use diesel::sql_types::Untyped;
use diesel::sqlite::Sqlite;

/// A raw-SQL query with `$n` parameters that SQLite prepares once per connection.
pub(crate) type CachedQuery<'a, ST = Untyped> = jobs_driver::cached::CachedQuery<'a, Sqlite, ST>;
