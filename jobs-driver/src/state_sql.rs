//! [`JobState`] in diesel queries on Postgres (feature `postgres`): the `job_state` enum
//! ([`PgJobState`]), written and read as its label.

use std::io::Write;

use diesel::deserialize::{self, FromSql};
use diesel::pg::{Pg, PgValue};
use diesel::serialize::{self, IsNull, Output, ToSql};

use crate::sql_types::PgJobState;
use crate::state::JobState;

impl ToSql<PgJobState, Pg> for JobState {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        out.write_all(self.as_str().as_bytes())?;
        Ok(IsNull::No)
    }
}

impl FromSql<PgJobState, Pg> for JobState {
    fn from_sql(bytes: PgValue<'_>) -> deserialize::Result<Self> {
        let text = std::str::from_utf8(bytes.as_bytes())?;
        Ok(text.parse()?)
    }
}
