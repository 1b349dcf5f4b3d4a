//! Test support: the plan Postgres chooses for a prepared statement, as `EXPLAIN` prints it.
//! Plan tests assert on it to keep the hot and the dashboard statements on their indexes.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

#[derive(QueryableByName)]
struct PlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

/// `EXPLAIN EXECUTE {execute}` (e.g. `claim('q', 100)` for a statement prepared as `claim`),
/// one line per plan node.
pub(crate) async fn explain_execute(conn: &mut AsyncPgConnection, execute: &str) -> String {
    let lines: Vec<PlanLine> =
        diesel::sql_query(format!("EXPLAIN EXECUTE {execute}")).load(conn).await.expect("explain");
    lines.into_iter().map(|l| l.line).collect::<Vec<_>>().join("\n")
}
