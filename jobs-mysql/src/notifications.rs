//! `job_notifications`: how MariaDB and MySQL, which have no LISTEN/NOTIFY, tell every
//! process that jobs became available, that a running job was cancelled, or that a queue
//! was paused.
//!
//! A statement that causes one adds its row in the same transaction, so a rollback takes
//! the notification back with the change. Every process's listener reads the rows past
//! the last id it saw, and again, for a while, the ids it has not seen below that one:
//! `AUTO_INCREMENT` hands ids out at insert, not at commit, so a transaction that
//! commits late shows a lower id than rows already read. Rows older than [`KEEP`] are
//! trimmed. Notifications of this process's own commits also go straight to its
//! listeners (`local`).

use std::time::Duration;

use diesel::QueryableByName;
use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Notification, Result};

use crate::cached::CachedQuery;
use crate::time::micros;

/// How long rows stay for listeners that read late (a process paused by its host, say).
pub(crate) const KEEP: Duration = Duration::from_secs(60);

const INSERT: &str =
    "INSERT INTO job_notifications (channel, payload, created_at) VALUES ($1, $2, UTC_TIMESTAMP(6))";

/// Adds `notification` to the table, in `conn`'s transaction (if it is in one).
pub(crate) async fn add<C>(conn: &mut C, notification: &Notification) -> Result<()>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let (channel, payload) = notification.encode();
    CachedQuery::new(INSERT).bind::<Text, _>(channel).bind::<Text, _>(payload).execute(conn).await?;
    Ok(())
}

/// [`add`] on a synchronous diesel connection.
pub(crate) fn add_sync<C>(conn: &mut C, notification: &Notification) -> Result<()>
where
    C: diesel::Connection<Backend = Mysql>,
{
    let (channel, payload) = notification.encode();
    diesel::RunQueryDsl::execute(
        CachedQuery::new(INSERT).bind::<Text, _>(channel).bind::<Text, _>(payload),
        conn,
    )?;
    Ok(())
}

/// A stored notification.
#[derive(QueryableByName)]
pub(crate) struct Row {
    #[diesel(sql_type = BigInt)]
    pub(crate) id: i64,
    #[diesel(sql_type = Text)]
    pub(crate) channel: String,
    #[diesel(sql_type = Text)]
    pub(crate) payload: String,
}

/// The rows after id `after`, and those of `missing` (ids below it not read yet), oldest
/// first, at most 1,000.
pub(crate) async fn read<C>(conn: &mut C, after: i64, missing: &[i64]) -> Result<Vec<Row>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    Ok(CachedQuery::new(
        "(SELECT id, channel, payload FROM job_notifications WHERE id > $1)
         UNION ALL
         (SELECT n.id, n.channel, n.payload
          FROM JSON_TABLE($2, '$[*]' COLUMNS (id BIGINT PATH '$')) AS m
          STRAIGHT_JOIN job_notifications n ON n.id = m.id)
         ORDER BY id LIMIT 1000",
    )
    .bind::<BigInt, _>(after)
    .bind::<Text, _>(serde_json::Value::from(missing).to_string())
    .load(conn)
    .await?)
}

/// The newest notification's id (0 when there is none): a new listener starts after it.
pub(crate) async fn last_id<C>(conn: &mut C) -> Result<i64>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let row: crate::rows::Id =
        CachedQuery::new("SELECT COALESCE(MAX(id), 0) AS id FROM job_notifications").get_result(conn).await?;
    Ok(row.id)
}

/// Deletes the notifications older than [`KEEP`]. Returns how many went.
pub(crate) async fn trim<C>(conn: &mut C) -> Result<usize>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    Ok(CachedQuery::new(
        "DELETE FROM job_notifications WHERE created_at < UTC_TIMESTAMP(6) - INTERVAL $1 MICROSECOND",
    )
    .bind::<BigInt, _>(micros(KEEP))
    .execute(conn)
    .await?)
}
