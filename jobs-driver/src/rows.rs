//! The one-column rows drivers' raw statements return, declared once for every driver
//! (diesel loads them on any backend).

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

/// `id`, `workflow_id`: a job and its workflow, if any (what a prune removed).
#[derive(Debug, QueryableByName)]
pub struct Member {
    /// The job.
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    /// Its workflow.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub workflow_id: Option<i64>,
}

impl Member {
    /// The distinct workflows of `members`, ascending.
    pub fn workflows(members: &[Member]) -> Vec<i64> {
        let mut ids: Vec<i64> = members.iter().filter_map(|m| m.workflow_id).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}
