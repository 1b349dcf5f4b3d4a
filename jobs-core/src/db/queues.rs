//! Queue-wide settings shared by every node: pausing and resuming.

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};

use crate::db::control::CONTROL_CHANNEL;
use crate::error::Result;

const SET_PAUSED: &str = "\
WITH upsert AS (
    INSERT INTO job_queues AS q (name, paused, paused_at)
    VALUES ($1, $2, CASE WHEN $2 THEN now() END)
    ON CONFLICT (name) DO UPDATE
    SET paused = EXCLUDED.paused, paused_at = EXCLUDED.paused_at, updated_at = now()
    RETURNING q.name, q.paused
)
SELECT pg_notify($3, json_build_object('queue', name, 'paused', paused)::text)::text AS done FROM upsert";

/// Pauses (`true`) or resumes (`false`) `queue` on every node: the flag is stored, and the
/// nodes are told over NOTIFY when the caller's transaction commits.
pub async fn set_paused<C>(conn: &mut C, queue: &str, paused: bool) -> Result<()>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    diesel::sql_query(SET_PAUSED)
        .bind::<Text, _>(queue)
        .bind::<Bool, _>(paused)
        .bind::<Text, _>(CONTROL_CHANNEL)
        .execute(conn)
        .await?;
    Ok(())
}

#[derive(QueryableByName)]
struct Paused {
    #[diesel(sql_type = Bool)]
    paused: bool,
}

/// Whether `queue` is paused.
pub async fn is_paused<C>(conn: &mut C, queue: &str) -> Result<bool>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    let rows: Vec<Paused> = diesel::sql_query("SELECT paused FROM job_queues WHERE name = $1")
        .bind::<Text, _>(queue)
        .load(conn)
        .await?;
    Ok(rows.iter().any(|r| r.paused))
}

/// The names of every paused queue.
pub async fn paused_queues<C>(conn: &mut C) -> Result<Vec<String>>
where
    C: AsyncConnectionCore<Backend = diesel::pg::Pg> + Send,
{
    #[derive(QueryableByName)]
    struct Name {
        #[diesel(sql_type = Text)]
        name: String,
    }
    let rows: Vec<Name> =
        diesel::sql_query("SELECT name FROM job_queues WHERE paused ORDER BY name").load(conn).await?;
    Ok(rows.into_iter().map(|r| r.name).collect())
}
