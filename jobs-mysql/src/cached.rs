//! [`CachedQuery`] on MySQL: `jobs_driver::cached::CachedQuery`, prepared once per
//! connection (diesel-async prepares, runs and closes every uncached statement: two round
//! trips instead of one).

use diesel::mysql::Mysql;
use diesel::sql_types::Untyped;

/// A raw-SQL query with `$n` parameters that MySQL prepares once per connection.
pub(crate) type CachedQuery<'a, ST = Untyped> = jobs_driver::cached::CachedQuery<'a, Mysql, ST>;
