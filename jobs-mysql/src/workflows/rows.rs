//! The rows the workflow store's statements read.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer, Nullable, Text};
use jobs_driver::Result;
use jobs_driver::workflow::Edge;

#[derive(QueryableByName)]
pub(super) struct StateRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = Text)]
    pub(super) kind: String,
    #[diesel(sql_type = Text)]
    pub(super) state: String,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) result: Option<String>,
}

#[derive(QueryableByName)]
pub(super) struct LockedRow {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = Text)]
    pub(super) state: String,
    #[diesel(sql_type = Integer)]
    pub(super) waiting_on: i32,
    #[diesel(sql_type = Integer)]
    pub(super) failed_on: i32,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(super) workflow_id: Option<i64>,
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
pub(super) struct Setting {
    #[diesel(sql_type = BigInt)]
    pub(super) id: i64,
    #[diesel(sql_type = Text)]
    pub(super) on_failure: String,
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
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) outcome: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    pub(super) result: Option<String>,
}

#[derive(QueryableByName)]
pub(super) struct QueueRow {
    #[diesel(sql_type = Text)]
    pub(super) queue: String,
}

impl EdgeRow {
    pub(super) fn into_edge(self) -> Result<Edge> {
        Edge::from_stored(
            self.depends_on,
            self.job_id,
            self.kind,
            &self.needs,
            self.outcome.as_deref(),
            self.result.as_deref(),
        )
    }
}

#[derive(QueryableByName)]
pub(super) struct BatchRow {
    #[diesel(sql_type = Nullable<BigInt>)]
    pub(super) callback_id: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    pub(super) sealed: bool,
}
