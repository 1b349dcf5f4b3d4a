//! The batch array of a completion's outcomes, and its write, fenced, with the ids that
//! applied.

use diesel::mysql::Mysql;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncConnectionCore, RunQueryDsl};
use jobs_driver::{Completion, Result};

use crate::cached::CachedQuery;
use crate::jobs::read::ids_json;
use crate::rows::{Id, token};

/// One outcome's row of the batch array.
fn row(c: &Completion, other: bool) -> serde_json::Value {
    let mut row = vec![c.id.into(), c.attempt.into()];
    if other {
        row.extend([
            c.state.as_str().into(),
            c.result.as_deref().into(),
            c.error.as_deref().into(),
            c.delay_ms.into(),
            c.attempt_change().into(),
        ]);
    } else if let Some(result) = &c.result {
        row.push(result.as_str().into());
    }
    serde_json::Value::Array(row)
}

/// The batch array of `completions`, in id order: a statement joined to `jobs` by primary key locks the rows in the array's
/// order, and every other statement that locks several jobs locks them ascending (two
/// orders could deadlock).
pub(super) fn batch_json<'a>(completions: impl Iterator<Item = &'a Completion>, other: bool) -> String {
    let mut completions: Vec<&Completion> = completions.collect();
    completions.sort_by_key(|c| c.id);
    serde_json::Value::Array(completions.into_iter().map(|c| row(c, other)).collect()).to_string()
}

/// Writes `part` with `sql`; returns the ids that applied.
pub(super) async fn write_part<C>(
    conn: &mut C,
    sql: &'static str,
    part: &[&Completion],
    other: bool,
    now: Option<chrono::NaiveDateTime>,
) -> Result<Vec<i64>>
where
    C: AsyncConnectionCore<Backend = Mysql> + Send,
{
    let token = token();
    let n = CachedQuery::new(sql)
        .bind::<Text, _>(batch_json(part.iter().copied(), other))
        .bind::<Nullable<Datetime>, _>(now)
        .bind::<BigInt, _>(token)
        .execute(conn)
        .await?;
    if n == part.len() {
        return Ok(part.iter().map(|c| c.id).collect());
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = part.iter().map(|c| c.id).collect();
    let rows: Vec<Id> = CachedQuery::new(concat!("SELECT j.id FROM ", by_ids!(), " WHERE j.lock_token = $2"))
        .bind::<Text, _>(ids_json(&ids))
        .bind::<BigInt, _>(token)
        .load(conn)
        .await?;
    Ok(rows.into_iter().map(|r| r.id).collect())
}
