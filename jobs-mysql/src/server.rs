//! `server_status`: the server's version and whether it refuses writes.

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::{Result, ServerStatus};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    version: String,
    #[diesel(sql_type = Bool)]
    read_only: bool,
}

/// See [`jobs_driver::ServerStatusParams`]. The replica lag is not read (it takes
/// `SHOW REPLICA STATUS` and a privilege most application users lack).
pub(crate) async fn status(conn: &mut AsyncMysqlConnection) -> Result<ServerStatus> {
    let row: Row = diesel::sql_query("SELECT VERSION() AS version, @@global.read_only <> 0 AS read_only")
        .get_result(conn)
        .await?;
    let major = row.version.split('.').next().and_then(|m| m.parse().ok());
    Ok(ServerStatus { version: row.version, major, read_only: row.read_only, replica_lag: None })
}
