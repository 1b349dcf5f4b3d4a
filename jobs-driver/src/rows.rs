//! The one-column rows drivers' raw statements return, declared once for every driver
//! (diesel loads them on any backend).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Text};

/// `n`: a count.
#[derive(Debug, QueryableByName)]
pub struct Count {
    /// The count.
    #[diesel(sql_type = BigInt)]
    pub n: i64,
}

/// `id`: a job id.
#[derive(Debug, QueryableByName)]
pub struct Id {
    /// The id.
    #[diesel(sql_type = BigInt)]
    pub id: i64,
}

/// `flag`: a boolean.
#[derive(Debug, QueryableByName)]
pub struct Flag {
    /// The flag.
    #[diesel(sql_type = Bool)]
    pub flag: bool,
}

/// `name`: a name.
#[derive(Debug, QueryableByName)]
pub struct Name {
    /// The name.
    #[diesel(sql_type = Text)]
    pub name: String,
}
