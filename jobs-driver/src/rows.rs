//! The rows drivers' raw statements return, declared once for every driver (diesel
//! loads them on any backend).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};

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

/// A busy partition key's row of [`QueueLimitsUsageParams`](crate::QueueLimitsUsageParams),
/// each row carrying the totals too: `key`, `running`, `available`, `keys_running`,
/// `keys_at_limit` (see [`KeyLoad`](crate::KeyLoad) and [`LimitsUsage`](crate::LimitsUsage)).
#[derive(Debug, QueryableByName)]
pub struct KeyLoadRow {
    /// The key.
    #[diesel(sql_type = Nullable<Text>)]
    pub key: Option<String>,
    /// Its running jobs.
    #[diesel(sql_type = BigInt)]
    pub running: i64,
    /// Its available jobs, up to the cap.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub available: Option<i64>,
    /// Keys with running jobs.
    #[diesel(sql_type = BigInt)]
    pub keys_running: i64,
    /// Keys at the per-key limit.
    #[diesel(sql_type = BigInt)]
    pub keys_at_limit: i64,
}
