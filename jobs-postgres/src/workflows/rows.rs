//! The rows the workflow store's statements read.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Int4, Jsonb, Nullable, Text};
use jobs_driver::workflow::Edge;
use jobs_driver::{JobState, Needs};
use serde_json::Value;

#[derive(QueryableByName)]
pub(super) struct StateRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = Text)]
    pub(super) kind: String,
    #[diesel(sql_type = crate::schema::sql_types::JobState)]
    pub(super) state: JobState,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub(super) result: Option<Value>,
}

impl StateRow {
    pub(super) fn into_state(self) -> jobs_driver::workflow::DependencyState {
        jobs_driver::workflow::DependencyState {
            id: self.id,
            kind: self.kind,
            state: self.state,
            result: self.result,
        }
    }
}

#[derive(QueryableByName)]
pub(super) struct LockedRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = crate::schema::sql_types::JobState)]
    pub(super) state: JobState,
    #[diesel(sql_type = Int4)]
    pub(super) waiting_on: i32,
    #[diesel(sql_type = Int4)]
    pub(super) failed_on: i32,
    #[diesel(sql_type = Text)]
    pub(super) on_failure: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(super) cancelled_by_dependency: bool,
}

#[derive(QueryableByName)]
pub(super) struct PageRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(super) finished: bool,
}

#[derive(QueryableByName)]
pub(super) struct EdgeRow {
    #[diesel(sql_type = BigInt)]
    pub(super) depends_on: i64,
    #[diesel(sql_type = BigInt)]
    pub(super) job_id: i64,
    #[diesel(sql_type = Text)]
    pub(super) kind: String,
    #[diesel(sql_type = Text)]
    pub(super) needs: String,
    #[diesel(sql_type = Nullable<crate::schema::sql_types::JobState>)]
    pub(super) outcome: Option<JobState>,
    #[diesel(sql_type = Nullable<Jsonb>)]
    pub(super) result: Option<Value>,
}

impl From<EdgeRow> for Edge {
    fn from(r: EdgeRow) -> Edge {
        Edge {
            depends_on: r.depends_on,
            job_id: r.job_id,
            kind: r.kind,
            needs: Needs::from_stored(&r.needs),
            outcome: r.outcome,
            result: r.result,
        }
    }
}

#[derive(QueryableByName)]
pub(super) struct BatchRow {
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(super) callback_id: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(super) sealed: bool,
}
