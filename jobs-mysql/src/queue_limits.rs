//! Claims on a queue with cluster-wide limits (see [`jobs_driver::ClaimLimits`]): in one
//! transaction, lock the queue's row, read its limits and the rate's usage, count what
//! runs, claim what the limits allow, and store the usage.

use chrono::NaiveDateTime;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Datetime, Nullable, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
use jobs_driver::rows::Count;
use jobs_driver::{ClaimLimits, ClaimedJob, DriverError, JobClaimParams, RateWindow, Result};

use crate::cached::CachedQuery;
use crate::jobs::claim;
use crate::time::{naive, naive_opt, utc};

const LOCK_LIMITS: &str = "\
SELECT CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.global_limit')) AS SIGNED) AS global_limit,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_allowed')) AS SIGNED) AS rate_allowed,
       CAST(JSON_UNQUOTE(JSON_EXTRACT(settings, '$.rate_period_secs')) AS SIGNED) AS rate_period_secs,
       rate_window, rate_counts, COALESCE($2, UTC_TIMESTAMP(6)) AS now
FROM job_queues WHERE name = $1
FOR UPDATE";

// A statement of its own, after the lock (read committed: a snapshot per statement), so
// that it sees every claim committed by the transactions the lock waited for.
const COUNT_RUNNING: &str = "SELECT COUNT(*) AS n FROM jobs WHERE queue = $1 AND state = 'running'";

const STORE_USAGE: &str = "UPDATE job_queues SET rate_window = $2, rate_counts = $3 WHERE name = $1";

#[derive(QueryableByName)]
struct LimitsRow {
    #[diesel(sql_type = Nullable<BigInt>)]
    global_limit: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_allowed: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    rate_period_secs: Option<i64>,
    #[diesel(sql_type = Nullable<Datetime>)]
    rate_window: Option<NaiveDateTime>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = Datetime)]
    now: NaiveDateTime,
}

/// See [`JobClaimParams`]: a claim under the queue's limits when `limited`, otherwise the
/// plain claim.
pub(crate) async fn claim(
    conn: &mut AsyncMysqlConnection,
    params: JobClaimParams<'_>,
) -> Result<Vec<ClaimedJob>> {
    if !params.limited {
        return claim::claim(conn, params).await;
    }
    conn.transaction::<_, DriverError, _>(async |tx| {
        let rows: Vec<LimitsRow> = CachedQuery::new(LOCK_LIMITS)
            .bind::<Text, _>(params.queue)
            .bind::<Nullable<Datetime>, _>(naive_opt(params.now))
            .load(tx)
            .await?;
        let unlimited = JobClaimParams { limited: false, ..params };
        let Some(row) = rows.into_iter().next() else { return claim::claim(tx, unlimited).await };
        let now = utc(row.now);
        let window = RateWindow::decode(row.rate_window.map(utc), row.rate_counts.as_deref());
        let limits = ClaimLimits::stored(row.global_limit, row.rate_allowed, row.rate_period_secs, window);
        if !limits.any() {
            return claim::claim(tx, unlimited).await;
        }
        let running = match limits.global_limit {
            Some(_) => {
                let counted: Vec<Count> =
                    CachedQuery::new(COUNT_RUNNING).bind::<Text, _>(params.queue).load(tx).await?;
                counted.iter().map(|c| c.n).next().unwrap_or(0)
            }
            None => 0,
        };
        let wanted = i64::try_from(params.limit).unwrap_or(i64::MAX);
        let allowed = limits.allowance(wanted, running, now);
        if allowed == 0 {
            return Ok(Vec::new());
        }
        let limit = usize::try_from(allowed).unwrap_or(params.limit);
        let jobs = claim::claim(tx, JobClaimParams { limit, ..unlimited }).await?;
        if let Some(usage) = limits.after_claim(jobs.len() as i64, now) {
            CachedQuery::new(STORE_USAGE)
                .bind::<Text, _>(params.queue)
                .bind::<Datetime, _>(naive(usage.start))
                .bind::<Text, _>(usage.encode_counts())
                .execute(tx)
                .await?;
        }
        Ok(jobs)
    })
    .await
}
