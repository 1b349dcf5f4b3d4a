//! `server_status`: the server's version, whether it is a standby in recovery, and its
//! replay lag.

use std::time::Duration;

use diesel::QueryableByName;
use diesel::pg::Pg;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Result, ServerStatus};

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = Text)]
    version: String,
    #[diesel(sql_type = Integer)]
    major: i32,
    #[diesel(sql_type = Bool)]
    in_recovery: bool,
    #[diesel(sql_type = Nullable<BigInt>)]
    lag_ms: Option<i64>,
}

// A standby replaying, that has replayed all it received, is not behind, however long ago
// the primary last committed; otherwise (or while its replay is paused, when it may hold a
// received commit unapplied) it is behind by the age of the last commit it replayed.
const STATUS: &str = "\
SELECT 'PostgreSQL ' || current_setting('server_version') AS version,
       current_setting('server_version_num')::int / 10000 AS major,
       pg_is_in_recovery() AS in_recovery,
       CASE WHEN NOT pg_is_in_recovery() THEN NULL
            -- Replaying from an archive, not streaming: how far behind is unknown.
            WHEN pg_last_wal_receive_lsn() IS NULL THEN NULL
            WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() AND NOT pg_is_wal_replay_paused() THEN 0
            ELSE COALESCE((extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::bigint, 0)
       END AS lag_ms";

/// See [`jobs_driver::ServerStatusParams`].
pub(crate) async fn status<C>(conn: &mut C) -> Result<ServerStatus>
where
    C: AsyncConnectionCore<Backend = Pg> + Send,
{
    let row: Row = diesel::sql_query(STATUS).get_result(conn).await?;
    Ok(ServerStatus {
        version: row.version,
        major: u32::try_from(row.major).ok(),
        read_only: row.in_recovery,
        replica_lag: row.lag_ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
    })
}
