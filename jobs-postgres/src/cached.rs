//! [`CachedQuery`] on Postgres: `jobs_driver::cached::CachedQuery`, prepared once per
//! connection (see there).

use diesel::pg::Pg;
use diesel::sql_types::Untyped;

/// A raw-SQL query with `$n` parameters that Postgres prepares once per connection.
pub(crate) type CachedQuery<'a, ST = Untyped> = jobs_driver::cached::CachedQuery<'a, Pg, ST>;
