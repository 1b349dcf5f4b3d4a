//! Claims on a queue with cluster-wide limits (see [`jobs_driver::ClaimLimits`]): in one
//! transaction, lock the queue's row, read its limits and the rate's usage, count what
//! runs, claim what the limits allow, and store the usage.

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel::{OptionalExtension, QueryableByName};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use jobs_driver::rows::Count;
use jobs_driver::{ClaimLimits, ClaimedJob, DriverError, JobClaimParams, RateWindow, Result};

use crate::jobs::claim;

const LOCK_LIMITS: &str = "\
SELECT (settings ->> 'global_limit')::int8 AS global_limit,
       (settings ->> 'rate_allowed')::int8 AS rate_allowed,
       (settings ->> 'rate_period_secs')::int8 AS rate_period_secs,
       rate_window, rate_counts, COALESCE($2::timestamptz, now()) AS now
FROM job_queues WHERE name = $1
FOR UPDATE";

// A statement of its own, after the lock: its snapshot then holds every claim committed
// by the transactions the lock waited for.
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
    #[diesel(sql_type = Nullable<Timestamptz>)]
    rate_window: Option<DateTime<Utc>>,
    #[diesel(sql_type = Nullable<Text>)]
    rate_counts: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    now: DateTime<Utc>,
}

/// See [`JobClaimParams`]: a claim under the queue's limits when `limited`, otherwise the
/// plain claim.
pub(crate) async fn claim(
    conn: &mut AsyncPgConnection,
    params: JobClaimParams<'_>,
) -> Result<Vec<ClaimedJob>> {
    if !params.limited {
        return claim::claim(conn, params).await;
    }
    conn.transaction::<_, DriverError, _>(async |tx| {
        let row: Option<LimitsRow> = diesel::sql_query(LOCK_LIMITS)
            .bind::<Text, _>(params.queue)
            .bind::<Nullable<Timestamptz>, _>(params.now)
            .get_result(tx)
            .await
            .optional()?;
        let unlimited = JobClaimParams { limited: false, ..params };
        let Some(row) = row else { return claim::claim(tx, unlimited).await };
        let window = RateWindow::decode(row.rate_window, row.rate_counts.as_deref());
        let limits = ClaimLimits::stored(row.global_limit, row.rate_allowed, row.rate_period_secs, window);
        if !limits.any() {
            return claim::claim(tx, unlimited).await;
        }
        let running = match limits.global_limit {
            Some(_) => {
                diesel::sql_query(COUNT_RUNNING)
                    .bind::<Text, _>(params.queue)
                    .get_result::<Count>(tx)
                    .await?
                    .n
            }
            None => 0,
        };
        let wanted = i64::try_from(params.limit).unwrap_or(i64::MAX);
        let allowed = limits.allowance(wanted, running, row.now);
        if allowed == 0 {
            return Ok(Vec::new());
        }
        let limit = usize::try_from(allowed).unwrap_or(params.limit);
        let jobs = claim::claim(
            tx,
            JobClaimParams {
                limit,
                recurring_size: params.recurring_size && limit == params.limit,
                ..unlimited
            },
        )
        .await?;
        if let Some(usage) = limits.after_claim(jobs.len() as i64, row.now) {
            diesel::sql_query(STORE_USAGE)
                .bind::<Text, _>(params.queue)
                .bind::<Timestamptz, _>(usage.start)
                .bind::<Text, _>(usage.encode_counts())
                .execute(tx)
                .await?;
        }
        Ok(jobs)
    })
    .await
}
