//! Claims on a queue with cluster-wide limits (see [`jobs_driver::ClaimLimits`]): read
//! the queue's limits and the rate's usage, count what runs, claim what the limits allow,
//! and store the usage. All in the writer's immediate transaction, which already makes
//! every process's claims run one after another.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{RunQueryDsl, SqliteConnection};
use jobs_driver::rows::Count;
use jobs_driver::{ClaimLimits, ClaimedJob, RateWindow, Result};

use crate::cached::CachedQuery;
use crate::jobs::claim;
use crate::time::{from_ms, to_ms};

const READ_LIMITS: &str = "\
SELECT json_extract(settings, '$.global_limit') AS global_limit,
       json_extract(settings, '$.rate_allowed') AS rate_allowed,
       json_extract(settings, '$.rate_period_secs') AS rate_period_secs,
       rate_window, rate_counts
FROM job_queues WHERE name = $1";

const COUNT_RUNNING: &str = "SELECT count(*) AS n FROM jobs WHERE queue = $1 AND state = 'running'";

const STORE_USAGE: &str = "UPDATE job_queues SET rate_window = $2, rate_counts = $3 WHERE name = $1";

#[derive(QueryableByName)]
struct LimitsRow {
    #[diesel(sql_type = Nullable<BigInt>)]
    global_limit: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_allowed: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_period_secs: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_window: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
}

/// Claims up to `limit` of `queue`'s jobs for `node` at `now_ms`, under the queue's
/// limits when `limited` (see [`jobs_driver::JobClaimParams::limited`]).
pub(crate) fn claim(
    conn: &mut SqliteConnection,
    queue: &str,
    limit: usize,
    node: &str,
    now_ms: i64,
    limited: bool,
) -> Result<Vec<ClaimedJob>> {
    if !limited {
        return claim::claim(conn, queue, limit, node, now_ms);
    }
    let rows: Vec<LimitsRow> = CachedQuery::new(READ_LIMITS).bind::<Text, _>(queue).load(conn)?;
    let Some(row) = rows.into_iter().next() else { return claim::claim(conn, queue, limit, node, now_ms) };
    let window = RateWindow::decode(row.rate_window.map(from_ms), row.rate_counts.as_deref());
    let limits = ClaimLimits::stored(row.global_limit, row.rate_allowed, row.rate_period_secs, window);
    if !limits.any() {
        return claim::claim(conn, queue, limit, node, now_ms);
    }
    let running = match limits.global_limit {
        Some(_) => {
            let counted: Vec<Count> = CachedQuery::new(COUNT_RUNNING).bind::<Text, _>(queue).load(conn)?;
            counted.iter().map(|c| c.n).next().unwrap_or(0)
        }
        None => 0,
    };
    let now = from_ms(now_ms);
    let allowed = limits.allowance(i64::try_from(limit).unwrap_or(i64::MAX), running, now);
    if allowed == 0 {
        return Ok(Vec::new());
    }
    let jobs = claim::claim(conn, queue, usize::try_from(allowed).unwrap_or(limit), node, now_ms)?;
    if let Some(usage) = limits.after_claim(jobs.len() as i64, now) {
        CachedQuery::new(STORE_USAGE)
            .bind::<Text, _>(queue)
            .bind::<BigInt, _>(to_ms(usage.start))
            .bind::<Text, _>(usage.encode_counts())
            .execute(conn)?;
    }
    Ok(jobs)
}
