//! `server_status`: the SQLite library's version (a file has no replicas).

use diesel::sql_types::Text;
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use jobs_driver::{Result, ServerStatus};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    version: String,
}

/// See [`jobs_driver::ServerStatusParams`].
pub(crate) fn status(conn: &mut SqliteConnection) -> Result<ServerStatus> {
    let row: Row = diesel::sql_query("SELECT sqlite_version() AS version").get_result(conn)?;
    let major = row.version.split('.').next().and_then(|m| m.parse().ok());
    Ok(ServerStatus {
        version: format!("SQLite {}", row.version),
        major,
        read_only: false,
        replica_lag: None,
    })
}
