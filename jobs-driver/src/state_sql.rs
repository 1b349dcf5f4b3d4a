//! [`JobState`] in diesel queries on Postgres (feature `postgres`): the `job_state` enum,
//! written and read as its label. It lives here, beside the type, because only the crate
//! that defines `JobState` may implement diesel's expression traits for it; the Postgres
//! driver's schema names this SQL type.

use std::io::Write;

use diesel::deserialize::{self, FromSql};
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{self, IsNull, Output, ToSql};

use crate::state::JobState;

/// The SQL types of the Postgres schema that diesel does not provide.
pub mod pg {
    /// The `job_state` enum.
    #[derive(diesel::sql_types::SqlType, diesel::query_builder::QueryId, Debug, Clone, Copy)]
    #[diesel(postgres_type(name = "job_state"))]
    pub struct JobState;
}

impl ToSql<pg::JobState, Pg> for JobState {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        out.write_all(self.as_str().as_bytes())?;
        Ok(IsNull::No)
    }
}

impl FromSql<pg::JobState, Pg> for JobState {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        let text = std::str::from_utf8(bytes.as_bytes())?;
        Ok(text.parse()?)
    }
}
