//! `job_notifications`: how SQLite, which has no LISTEN/NOTIFY, tells every process that
//! jobs became available, that a running job was cancelled, or that a queue was paused.
//!
//! A statement that causes one adds its row in the same transaction, so a rollback takes
//! the notification back with the change. Every process's listener reads the rows past
//! the last id it saw (SQLite's one writer assigns ids in commit order, so none is
//! skipped) and trims rows older than [`KEEP`]. Notifications of this process's own
//! commits also go straight to its listeners ([`Local::wake`](crate::local::Local)).

use std::time::Duration;

use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryableByName, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncConnectionCore;
use jobs_driver::{Notification, Result};

use crate::cached::CachedQuery;
use crate::time::now_ms;

/// How long rows stay for listeners that read late (a process paused by its host, say).
pub(crate) const KEEP: Duration = Duration::from_secs(60);

const INSERT: &str = "INSERT INTO job_notifications (channel, payload, created_at) VALUES ($1, $2, $3)";

/// Adds `notification` to the table, in `conn`'s transaction. Its time is the wall
/// clock's (not an operation's injected clock): listeners trim by it.
pub(crate) fn add<C: diesel::Connection<Backend = Sqlite>>(
    conn: &mut C,
    notification: &Notification,
) -> Result<()> {
    let (channel, payload) = notification.encode();
    CachedQuery::new(INSERT)
        .bind::<Text, _>(channel)
        .bind::<Text, _>(payload)
        .bind::<BigInt, _>(now_ms(None))
        .execute(conn)?;
    Ok(())
}

/// [`add`] on an async connection of the application's.
pub(crate) async fn add_async<C>(conn: &mut C, notification: &Notification) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Sqlite> + Send,
{
    let (channel, payload) = notification.encode();
    diesel_async::RunQueryDsl::execute(
        CachedQuery::new(INSERT)
            .bind::<Text, _>(channel)
            .bind::<Text, _>(payload)
            .bind::<BigInt, _>(now_ms(None)),
        conn,
    )
    .await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Row {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    channel: String,
    #[diesel(sql_type = Text)]
    payload: String,
}

/// One wake-up per distinct queue of `queues` (the statements that make jobs available
/// return a row per job).
pub(crate) fn per_queue(mut queues: Vec<&str>) -> Vec<Notification> {
    queues.sort_unstable();
    queues.dedup();
    queues.into_iter().map(|queue| Notification::JobsAvailable { queue: queue.to_owned() }).collect()
}

/// The notifications after id `after`, oldest first, at most 1,000, with the last id read.
pub(crate) fn read_after(conn: &mut SqliteConnection, after: i64) -> Result<(Vec<Notification>, i64)> {
    let rows: Vec<Row> = CachedQuery::new(
        "SELECT id, channel, payload FROM job_notifications WHERE id > $1 ORDER BY id LIMIT 1000",
    )
    .bind::<BigInt, _>(after)
    .load(conn)?;
    let last = rows.last().map_or(after, |r| r.id);
    let notifications = rows
        .into_iter()
        .filter_map(|r| {
            let n = Notification::decode(&r.channel, &r.payload);
            if n.is_none() {
                tracing::warn!(channel = r.channel, payload = r.payload, "ignoring an unknown notification");
            }
            n
        })
        .collect();
    Ok((notifications, last))
}

/// The newest notification's id (0 when there is none): a new listener starts after it.
pub(crate) fn last_id(conn: &mut SqliteConnection) -> Result<i64> {
    #[derive(QueryableByName)]
    struct Last {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let row: Last =
        CachedQuery::new("SELECT COALESCE(max(id), 0) AS id FROM job_notifications").get_result(conn)?;
    Ok(row.id)
}

/// Deletes the notifications older than [`KEEP`]. Returns how many went.
pub(crate) fn trim(conn: &mut SqliteConnection, now_ms: i64) -> Result<usize> {
    let cutoff = now_ms - crate::time::millis(KEEP);
    Ok(CachedQuery::new("DELETE FROM job_notifications WHERE created_at < $1")
        .bind::<BigInt, _>(cutoff)
        .execute(conn)?)
}
