//! The helpers `jobs_core::testing` offers users' own tests, used as a user would:
//! assert/refute enqueued, perform one job, drain a queue, and inline mode.

use futures::FutureExt;
use jobs_core::postgres::PgContext;
use jobs_core::testing::{
    Expected, TestDatabase, assert_enqueued, drain_queue, drain_queue_with, inline, inline_with, perform_job,
    perform_job_with, refute_enqueued,
};
use jobs_core::{AppData, Data, JobContext, JobState, RunOutcome, job};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Welcome {
    user_id: i64,
    email: String,
}

#[derive(Debug, thiserror::Error)]
#[error("mailbox {0} does not exist")]
struct Bounced(String);

#[job(kind = "helpers.welcome", queue = "helpers_mail", max_attempts = 3)]
async fn welcome(_ctx: JobContext, args: Welcome) -> Result<String, Bounced> {
    if args.email.ends_with("@bounce.example") {
        return Err(Bounced(args.email));
    }
    Ok(format!("sent to {}", args.email))
}

/// Enqueues the welcome mail itself: in inline mode, that runs too.
#[job(kind = "helpers.onboard", queue = "helpers_mail")]
async fn onboard(ctx: JobContext, user_id: i64) -> Result<(), jobs_core::Error> {
    let pool = ctx.pool()?;
    welcome::enqueue(pool, Welcome { user_id, email: format!("u{user_id}@example.com") }).await?;
    Ok(())
}

fn mail(user_id: i64, email: &str) -> Welcome {
    Welcome { user_id, email: email.into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assert_and_refute_enqueued_match_kind_args_subset_and_queue() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(2).expect("pool");
    let id = welcome::enqueue(&pool, mail(7, "a@example.com")).await.expect("enqueue").id;

    let row = assert_enqueued(
        &pool,
        &Expected::job::<welcome>().args(json!({ "user_id": 7 })).queue("helpers_mail"),
    )
    .await;
    assert_eq!(row.id, id);
    refute_enqueued(&pool, &Expected::job::<welcome>().args(json!({ "user_id": 8 }))).await;
    refute_enqueued(&pool, &Expected::job::<welcome>().queue("other")).await;
    refute_enqueued(&pool, &Expected::job::<onboard>()).await;

    // A failing assertion says what is there instead.
    let failed = std::panic::AssertUnwindSafe(assert_enqueued(
        &pool,
        &Expected::job::<welcome>().args(json!({ "user_id": 9 })),
    ))
    .catch_unwind()
    .await
    .expect_err("no such job");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains(&format!("#{id} queue helpers_mail args")), "{message}");
    let failed = std::panic::AssertUnwindSafe(refute_enqueued(&pool, &Expected::job::<welcome>()))
        .catch_unwind()
        .await
        .expect_err("there is one");
    assert!(failed.downcast_ref::<String>().is_some_and(|m| m.contains(&format!("found #{id}"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perform_job_runs_one_handler_with_round_tripped_args() {
    match perform_job::<welcome>(None, mail(1, "a@example.com")).await.expect("perform") {
        RunOutcome::Completed(Some(result)) => assert_eq!(result, "\"sent to a@example.com\""),
        other => panic!("expected a result, got {other:?}"),
    }
    match perform_job::<welcome>(None, mail(2, "b@bounce.example")).await.expect("perform") {
        RunOutcome::Failed(f) => assert_eq!(f.message, "mailbox b@bounce.example does not exist"),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_queue_runs_everything_due_through_the_worker_path() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids: Vec<i64> = jobs_core::enqueue_many(
        &pool,
        [mail(1, "a@example.com"), mail(2, "b@bounce.example"), mail(3, "c@example.com")].map(welcome::build),
    )
    .await
    .expect("enqueue")
    .iter()
    .map(|e| e.id)
    .collect();
    let later = welcome::build(mail(4, "d@example.com"))
        .run_in(std::time::Duration::from_secs(3600))
        .enqueue(&pool)
        .await
        .expect("enqueue")
        .id;

    let drained = drain_queue(&pool, "helpers_mail").await.expect("drain");
    let summary: Vec<(i64, JobState)> = drained.iter().map(|d| (d.id, d.state)).collect();
    assert_eq!(
        summary,
        [(ids[0], JobState::Completed), (ids[1], JobState::Retryable), (ids[2], JobState::Completed)]
    );
    assert_eq!(drained[0].result, Some(json!("sent to a@example.com")));
    assert_eq!(
        drained[1].error.as_ref().map(|e| e["message"].clone()),
        Some(json!("mailbox b@bounce.example does not exist"))
    );
    // The rows say the same, and what is not due stays.
    let mut conn = db.connect().await.expect("conn");
    let row = jobs_core::get_job(&mut conn, ids[1]).await.expect("get").expect("row");
    assert_eq!((row.state, row.attempt), (JobState::Retryable, 1));
    assert_enqueued(&pool, &Expected::job::<welcome>().args(json!({ "user_id": 4 }))).await;
    assert!(drain_queue(&pool, "helpers_mail").await.expect("drain again").is_empty(), "nothing else is due");
    assert_eq!(
        jobs_core::get_job(&mut conn, later).await.expect("get").map(|r| r.state),
        Some(JobState::Scheduled)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_mode_runs_jobs_at_enqueue_and_inserts_nothing() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let (enqueued, runs) = inline(pool.clone(), async {
        let first = onboard::enqueue(&pool, 5).await.expect("enqueue");
        let second = welcome::enqueue(&pool, mail(6, "f@bounce.example")).await.expect("enqueue");
        (first, second)
    })
    .await
    .expect("inline");
    assert_eq!((enqueued.0.id, enqueued.1.id), (0, 0), "nothing inserted");
    let summary: Vec<(&str, JobState)> = runs.iter().map(|r| (r.kind.as_str(), r.state)).collect();
    // The nested welcome ran inside onboard, so it is recorded first.
    assert_eq!(
        summary,
        [
            ("helpers.welcome", JobState::Completed),
            ("helpers.onboard", JobState::Completed),
            ("helpers.welcome", JobState::Retryable)
        ]
    );
    assert_eq!(runs[0].result, Some(json!("sent to u5@example.com")));
    refute_enqueued(&pool, &Expected::job::<welcome>()).await;
    // Outside the scope, enqueueing inserts again.
    welcome::enqueue(&pool, mail(7, "g@example.com")).await.expect("enqueue");
    assert_enqueued(&pool, &Expected::job::<welcome>().args(json!({ "user_id": 7 }))).await;
}

/// The application's signature line, a value its jobs reach.
struct Signature(&'static str);

/// Signs a note with the application's signature (a `Data<T>` parameter).
#[job(kind = "helpers.sign", queue = "helpers_sign")]
async fn sign(_ctx: JobContext, note: String, signature: Data<Signature>) -> Result<String, Bounced> {
    Ok(format!("{note} -- {}", signature.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_helper_hands_jobs_the_applications_values() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let data = || AppData::new().with(Signature("the shop"));

    let outcome = perform_job_with::<sign>(None, data(), "hi".into()).await.expect("perform");
    assert!(matches!(&outcome, RunOutcome::Completed(Some(v)) if v == "\"hi -- the shop\""), "{outcome:?}");
    let RunOutcome::Failed(failure) = perform_job::<sign>(None, "hi".into()).await.expect("perform") else {
        panic!("a run without the value fails")
    };
    assert_eq!(failure.error_type, "missing_data");
    assert!(failure.message.contains("Signature"), "{}", failure.message);

    let (_, runs) = inline_with(pool.clone(), data(), async {
        sign::enqueue(&pool, "inline".into()).await.expect("enqueue")
    })
    .await
    .expect("inline");
    assert_eq!(runs[0].result, Some(json!("inline -- the shop")));
    // Without the value, the run fails as on a worker that lacks it, naming the type.
    let (_, runs) = inline(pool.clone(), async { sign::enqueue(&pool, "x".into()).await.expect("enqueue") })
        .await
        .expect("inline");
    assert_eq!(runs[0].state, JobState::Retryable);
    let error = runs[0].error.as_ref().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("helpers.sign") && error.contains("Signature"), "{error}");

    sign::enqueue(&pool, "drained".into()).await.expect("enqueue");
    let drained = drain_queue_with(&pool, data(), "helpers_sign").await.expect("drain");
    assert_eq!(drained[0].result, Some(json!("drained -- the shop")));
    assert!(drain_queue(&pool, "helpers_sign").await.expect("nothing left").is_empty());
}
