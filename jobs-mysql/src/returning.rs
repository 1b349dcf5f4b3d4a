//! Whether the server takes `INSERT … RETURNING`: MariaDB does (since 10.5), MySQL does
//! not. The enqueue returns its rows where it can, and otherwise executes its statements,
//! then reads the rows back by their token inside a transaction of its own (`insert`).
//!
//! The answer is one per process: read from `SELECT VERSION()` on the first connection
//! an insert runs on, or set beforehand by [`disable_insert_returning`]. Reading the rows
//! back works on every server, so a process that talks to MySQL and MariaDB both (or
//! goes through a proxy that refuses `RETURNING`) calls [`disable_insert_returning`] at
//! startup.

use std::sync::atomic::{AtomicU8, Ordering};

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::Text;
use diesel_async::AsyncConnectionCore;
use jobs_driver::Result;

use crate::cached::CachedQuery;

const UNKNOWN: u8 = 0;
const TAKES: u8 = 1;
const LACKS: u8 = 2;

static INSERT_RETURNING: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Makes every enqueue of this process read its rows back instead of using
/// `INSERT … RETURNING`, whatever the server (the way it always works on MySQL). Call it
/// before the first enqueue when one process uses MySQL and MariaDB servers both, or a
/// proxy that rejects `RETURNING`. It cannot be undone.
pub fn disable_insert_returning() {
    INSERT_RETURNING.store(LACKS, Ordering::Relaxed);
}

/// Whether inserts on `conn`'s server may use `RETURNING`: the process's answer, read
/// from `conn` the first time.
pub(crate) async fn insert_returning<C>(conn: &mut C) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    match INSERT_RETURNING.load(Ordering::Relaxed) {
        TAKES => return Ok(true),
        LACKS => return Ok(false),
        _ => {}
    }
    #[derive(QueryableByName)]
    struct Version {
        #[diesel(sql_type = Text)]
        version: String,
    }
    let version = CachedQuery::new("SELECT VERSION() AS version");
    let row: Version = diesel_async::RunQueryDsl::get_result(version, conn).await?;
    let found = if takes_returning(&row.version) { TAKES } else { LACKS };
    // A `disable_insert_returning` that ran meanwhile wins.
    let answer = match INSERT_RETURNING.compare_exchange(UNKNOWN, found, Ordering::Relaxed, Ordering::Relaxed)
    {
        Ok(_) => found,
        Err(set) => set,
    };
    Ok(answer == TAKES)
}

/// Whether the server of `version` (`SELECT VERSION()`) takes `INSERT … RETURNING`:
/// MariaDB 10.5 or later.
fn takes_returning(version: &str) -> bool {
    if !version.contains("MariaDB") {
        return false;
    }
    // A MariaDB behind MySQL's replication prefix reads "5.5.5-10.11.6-MariaDB".
    let version = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut numbers = version.split(['.', '-']).map(|part| part.parse::<u32>().unwrap_or(0));
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    (major, minor) >= (10, 5)
}

#[cfg(test)]
mod tests {
    use super::takes_returning;

    #[test]
    fn only_mariadb_from_10_5_takes_insert_returning() {
        assert!(takes_returning("10.11.6-MariaDB-0+deb12u1"));
        assert!(takes_returning("5.5.5-10.6.18-MariaDB-log"));
        assert!(takes_returning("11.4.2-MariaDB"));
        assert!(takes_returning("10.5.0-MariaDB"));
        assert!(!takes_returning("10.4.34-MariaDB"));
        assert!(!takes_returning("8.0.36"));
        assert!(!takes_returning("8.4.2-0ubuntu0.24.04.1"));
        assert!(!takes_returning("9.1.0-commercial"));
    }
}
