//! The one-column rows raw statements return, declared once for every module.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Text};

/// `n`: a count.
#[derive(QueryableByName)]
pub(crate) struct Count {
    #[diesel(sql_type = BigInt)]
    pub(crate) n: i64,
}

/// `id`: a job id.
#[derive(QueryableByName)]
pub(crate) struct Id {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
}

/// `flag`: a boolean.
#[derive(QueryableByName)]
pub(crate) struct Flag {
    #[diesel(sql_type = Bool)]
    pub(crate) flag: bool,
}

/// `name`: a name.
#[derive(QueryableByName)]
pub(crate) struct Name {
    #[diesel(sql_type = Text)]
    pub(crate) name: String,
}

/// Milliseconds of `d` for a bound parameter, saturating.
pub(crate) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
